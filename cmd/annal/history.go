package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/spf13/cobra"
)

// historyFilters are the filters annal history and annal tail share.
type historyFilters struct {
	actor, envelope, session, kind, typ, outcome, target, since, until, traceID string
}

func (f *historyFilters) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.actor, "actor", "", "events of this actor")
	fl.StringVar(&f.envelope, "envelope", "", "events under this envelope")
	fl.StringVar(&f.session, "session", "", "events of this session")
	fl.StringVar(&f.kind, "kind", "", "events of this kind (action, action.denied, hold.requested, actor.created, ...)")
	fl.StringVar(&f.typ, "type", "", "actions of this type (observe, mutate, execute, ...)")
	fl.StringVar(&f.outcome, "outcome", "", "committed, denied or held")
	fl.StringVar(&f.target, "target", "", "actions whose target starts with this")
	fl.StringVar(&f.since, "since", "", "events at or after this RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "events at or before this RFC 3339 time")
	fl.StringVar(&f.traceID, "trace-id", "", "events of the request whose W3C trace id this is (32 lower-case hex digits, a receipt's trace_id)")
}

func (f *historyFilters) values() url.Values {
	v := url.Values{}
	for name, value := range map[string]string{"actor": f.actor, "envelope": f.envelope, "session": f.session, "kind": f.kind,
		"type": f.typ, "outcome": f.outcome, "target": f.target, "since": f.since, "until": f.until, "trace_id": f.traceID} {
		if value != "" {
			v.Set(name, value)
		}
	}
	return v
}

func historyCommand(g *globalFlags) *cobra.Command {
	var f historyFilters
	var asJSON, oldest bool
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "history [filters] [--oldest] [--limit N] [--json]",
		Short: "Read the history: events newest first (yours and your agents'; root: all), one page",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := f.values()
			q.Set("limit", strconv.Itoa(limit))
			if oldest {
				q.Set("order", "oldest")
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			return g.with(cmd, func(ctx context.Context, c *client.Client) error {
				page, err := c.History(ctx, q)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), page)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "INDEX\tTIME\tACTOR\tKIND\tTYPE\tTARGET\tOUTCOME\tNOTE")
				printHistory(tw, page.Events)
				if err := tw.Flush(); err != nil {
					return err
				}
				if page.NextCursor != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "more: annal history --cursor %d (same filters)\n", *page.NextCursor)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the page as JSON (each event exactly as logged)")
	cmd.Flags().BoolVar(&oldest, "oldest", false, "oldest first")
	cmd.Flags().IntVar(&limit, "limit", 50, "events per page (1 to 500)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from this index (the last page's 'more' line)")
	return cmd
}

func tailCommand(g *globalFlags) *cobra.Command {
	var f historyFilters
	var follow, asJSON bool
	var n int
	cmd := &cobra.Command{
		Use:   "tail [filters] [-n N] [-f]",
		Short: "Print the last events; with -f, keep printing new ones as they are logged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(true)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			q := f.values()
			q.Set("limit", strconv.Itoa(n))
			page, err := c.History(ctx, q)
			if err != nil {
				return err
			}
			events := page.Events
			for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
				events[i], events[j] = events[j], events[i]
			}
			out := cmd.OutOrStdout()
			emit := func(events []api.HistoryItem) {
				if asJSON {
					for _, e := range events {
						line, _ := json.Marshal(e)
						fmt.Fprintf(out, "%s\n", line)
					}
					return
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				printHistory(tw, events)
				tw.Flush()
			}
			emit(events)
			if !follow {
				return nil
			}
			// Then the stream: every event logged after the last one shown.
			var after *uint64
			if len(events) > 0 {
				after = &events[len(events)-1].Index
			}
			return c.Stream(ctx, f.values(), after, func(e api.HistoryItem) error {
				emit([]api.HistoryItem{e})
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "how many of the last events to print (1 to 500)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

// printHistory writes one row per event; what an agent wrote is made inert.
// NOTE says how a hold was answered, and why, where the event answers one.
func printHistory(w io.Writer, events []api.HistoryItem) {
	for _, e := range events {
		ev, _ := e.Summary()
		typ, target := "", ""
		if ev.Action != nil {
			typ, target = ev.Action.Type, ev.Action.Target
		}
		outcome := map[string]string{"action": "committed", "action.denied": "denied", "hold.requested": "held"}[ev.Kind]
		note := ""
		if h := ev.Hold; h != nil && h.Decision != "" {
			answered := map[string]string{"approve": "approved", "reject": "rejected", "timeout": "timed out"}[h.Decision]
			if ev.Kind == "hold.answered" && h.Decision == "approve" {
				answered = "ended" // approved, but refused on re-check: its reason says so
			}
			note = "hold " + h.ID + " " + answered
			if h.AnsweredBy != "" && h.Decision != "timeout" {
				note += " by " + h.AnsweredBy
			}
			if h.Reason != "" {
				note += ": " + h.Reason
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Index, ev.Time, terminalSafe(ev.Actor), ev.Kind, terminalSafe(typ), terminalSafe(target), outcome, terminalSafe(note))
	}
}
