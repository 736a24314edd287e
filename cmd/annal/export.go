package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/spf13/cobra"
)

func exportCommand(g *globalFlags) *cobra.Command {
	var out, from, to, actor, session, kind, since, until string
	var oldSize uint64
	var progress string
	var withhold bool
	cmd := &cobra.Command{
		Use:   "export [-o FILE] [--from N] [--to N] [--actor ID] [--session ID] [--kind KIND] [--since T] [--until T] [--old-size N]",
		Short: "Write an audit bundle of the log's events, for annal-verify bundle",
		Long: `Write an audit bundle (annal.dev/audit-bundle/v1, testvectors/FORMATS.md): the
selected events, the latest signed checkpoint with its witness cosignatures, and
the proofs that every event is in the log under it. Check it offline with
annal-verify bundle --policy FILE BUNDLE.

With only --from and --to (default: the whole log) the bundle holds every event
of the index range [from, to), proven together. With --actor, --session, --kind,
--since or --until it holds only the matching events of that range, each with
its own inclusion proof, and none of the others (selective disclosure).
--session ID --kind session.delta gives one session's delta chain, for
annal-verify chain. --old-size N adds the proof that the log at size N (a
checkpoint you already hold) is a prefix of the bundle's. Sealed payloads the
kernel still holds travel opened, checked against their commitments;
--withhold-sealed leaves them closed.

Needs a human's credential. The bundle streams to FILE (written under a
temporary name and renamed once complete) or to stdout; a progress line goes
to stderr when it is a terminal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for name, v := range map[string]string{"from": from, "to": to, "actor": actor, "session": session, "kind": kind, "since": since, "until": until} {
				if v != "" {
					q.Set(name, v)
				}
			}
			if oldSize > 0 {
				q.Set("old_size", strconv.FormatUint(oldSize, 10))
			}
			if withhold {
				q.Set("sealed", "withhold")
			}
			c, err := g.client(true)
			if err != nil {
				return err
			}
			// A long export is not cut by the default timeout, only by an
			// explicit --timeout.
			ctx, cancel := g.context(cmd)
			if fl := cmd.Flag("timeout"); fl == nil || !fl.Changed {
				cancel()
				ctx, cancel = context.WithCancel(cmd.Context())
			}
			defer cancel()
			body, err := c.Bundle(ctx, q)
			if err != nil {
				return err
			}
			defer body.Close()
			var src io.Reader = body
			show := progress == "always" || progress == "auto" && isTerminal(os.Stderr)
			var pr *progressReader
			if show {
				pr = &progressReader{r: body, w: cmd.ErrOrStderr(), start: time.Now()}
				src = pr
			}
			if out == "" {
				_, err = io.Copy(cmd.OutOrStdout(), src)
			} else {
				err = atomicfile.Write(out, src, 0o644) // a failed export leaves no bundle behind
			}
			if pr != nil {
				pr.done()
			}
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write the bundle to this file (default stdout)")
	f.StringVar(&from, "from", "", "first index (default 0)")
	f.StringVar(&to, "to", "", "end index, exclusive (default the checkpoint's size)")
	f.StringVar(&actor, "actor", "", "only this actor's events")
	f.StringVar(&session, "session", "", "only this session's events")
	f.StringVar(&kind, "kind", "", "only events of this kind (e.g. action, session.delta)")
	f.StringVar(&since, "since", "", "only events at or after this RFC 3339 time")
	f.StringVar(&until, "until", "", "only events before this RFC 3339 time")
	f.Uint64Var(&oldSize, "old-size", 0, "add a consistency proof from this older tree size")
	f.StringVar(&progress, "progress", "auto", "progress on stderr: auto (when a terminal), always, never")
	f.BoolVar(&withhold, "withhold-sealed", false, "leave sealed payloads closed (commitments only): proofs without the personal data")
	return cmd
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressReader counts the lines of a bundle as they stream and redraws
// one status line: events so far, bytes, and, for a range bundle whose
// header gives the range, a percentage.
type progressReader struct {
	r      io.Reader
	w      io.Writer
	start  time.Time
	header []byte // the first line, until it is complete
	inBody bool
	total  uint64 // events of a range bundle, else 0
	lines  uint64
	bytes  int64
	drawn  time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	chunk := b[:n]
	p.bytes += int64(n)
	if !p.inBody {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			p.header = append(p.header, chunk...)
			return n, err
		}
		p.header = append(p.header, chunk[:i]...)
		p.inBody, chunk = true, chunk[i+1:]
		// Only for the display: annal-verify checks the header strictly.
		var h bundle.Header
		if json.Unmarshal(p.header, &h) == nil && h.Proof == bundle.ProofRange && h.Selection.From != nil && h.Selection.To != nil {
			p.total = *h.Selection.To - *h.Selection.From
		}
		p.header = nil
	}
	p.lines += uint64(bytes.Count(chunk, []byte{'\n'}))
	if time.Since(p.drawn) > 200*time.Millisecond {
		p.draw()
	}
	return n, err
}

func (p *progressReader) draw() {
	p.drawn = time.Now()
	events := p.lines
	if events > 0 && p.total > 0 && events > p.total {
		events = p.total // the trailer line
	}
	rate := float64(events) / max(time.Since(p.start).Seconds(), 1e-3)
	if p.total > 0 {
		fmt.Fprintf(p.w, "\r%6.1f%%  %d of %d events, %.1f MB, %.0f events/s   ", 100*float64(events)/float64(p.total), events, p.total, float64(p.bytes)/1e6, rate)
	} else {
		fmt.Fprintf(p.w, "\r%d events, %.1f MB, %.0f events/s   ", events, float64(p.bytes)/1e6, rate)
	}
}

func (p *progressReader) done() {
	p.draw()
	fmt.Fprintln(p.w)
}
