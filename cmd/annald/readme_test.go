package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

// The README's walkthroughs run as testscript scripts in testdata/script,
// against a fresh annald each, with the binaries TestMain built on PATH.
// TestREADMECommandsAreInTheScripts keeps the two in step: every command
// line of a walkthrough must be in its script, in the README's order, after
// the mechanical rewrites of scriptLinesOf.

// TestREADMEWalkthroughs runs every script in testdata/script. Besides
// testscript's own commands the scripts have:
//
//	annald-serve [FLAG...]   annald serve on ./annal-data and a free port (the
//	                         README's "annald serve running in another
//	                         terminal"), checkpoints every 100ms; sets
//	                         ANNAL_SERVER; stopped with SIGTERM at the end
//	capture NAME FILE RE     sets NAME to RE's first group (or its match) in
//	                         FILE, stdout being the last command's output:
//	                         the README's NAME=$(… | sed -n 's/RE/\1/p') and
//	                         NAME=$(cat FILE)
func TestREADMEWalkthroughs(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(annalBinary)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Values[scriptT{}] = env.T()
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"annald-serve": cmdAnnaldServe,
			"capture":      cmdCapture,
		},
	})
}

// scriptT is the key of the script's testscript.T in its values: a daemon
// that does not stop cleanly fails the script after its last line.
type scriptT struct{}

func cmdAnnaldServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! annald-serve")
	}
	d, err := tryStartDaemon(ts.MkAbs("annal-data"), args...)
	ts.Check(err)
	ts.Setenv("ANNAL_SERVER", d.url)
	t := ts.Value(scriptT{}).(testscript.T)
	ts.Defer(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-d.exited:
			if err != nil {
				t.Fatal(fmt.Sprintf("annald exited with %v; stderr:\n%s", err, d.stderr))
			}
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			t.Fatal(fmt.Sprintf("annald did not stop on SIGTERM; stderr:\n%s", d.stderr))
		}
	})
}

func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: capture NAME FILE REGEXP")
	}
	re, err := regexp.Compile("(?m)" + args[2])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile(args[1]))
	if m == nil {
		ts.Fatalf("nothing in %s matches %s", args[1], args[2])
	}
	value := m[0]
	if len(m) > 1 {
		value = m[1]
	}
	ts.Setenv(args[0], value)
	ts.Logf("%s=%s", args[0], value)
}

// readmeSection says what becomes of a README section's sh blocks.
type readmeSection struct {
	heading string // the start of the section's heading
	script  string // in testdata/script; "" when not scripted
	why     string // why not, when script is ""
}

// readmeSections names, for every README section with a ```sh block, the
// script that runs its commands, or why none does. Sections sharing a
// script are pasted one after the other, in the README's order.
var readmeSections = []readmeSection{
	{"Set up", "", "it starts annald (annald-serve in every script) and runs the whole test suite"},
	{"Five minutes", "walkthrough.txtar", ""},
	{"Witnesses and offline checks", "", "it needs a witness key copied by hand (W1='...') and an evidence file no README command writes; TestWitnessedCheckpoints runs annald with witnesses"},
	{"Audit bundles", "walkthrough.txtar", ""},
	{"The log proves the rules", "walkthrough.txtar", ""},
	{"A randomized concurrent workload", "", "it runs go test and annal-bench for seconds to minutes; TestWorkload is part of go test ./..."},
	{"Even the kernel cannot forge", "signed.txtar", ""},
	{"Erasable payloads", "erase.txtar", ""},
	{"Reading the history", "history.txtar", ""},
	{"The agent file system", "vfs.txtar", ""},
	{"Traces", "", "it needs an OTLP receiver: TestSpec002_Observability_TracesReachJaeger runs annald --otlp-endpoint against Jaeger (.ci/services) and annal history --trace-id"},
	{"Past one machine", "", "it needs MariaDB and an S3 store (.ci/services)"},
	{"Holds in a Matrix room", "", "it needs a Matrix homeserver with a bot account and a room: TestREADMEMatrixSection runs its sh block as pasted, with bash, against Dendrite (.ci/services)"},
}

// notScripted holds the command lines of scripted sections that no script
// runs, and why.
var notScripted = map[string]string{
	`go run ./cmd/annald tolerate --data annal-data --entry 3 --reason "two creations raced past a missing claim"`: "it needs a log holding an entry its rules refuse, which no README command writes; TestTolerateCommand forges one",
}

// shellValues are the README's command substitutions inside arguments, and
// the variable a script's capture sets to the same value.
var shellValues = map[string]string{
	`$(cat annal-data/log.pub)`:   "$LOG_PUB",
	`$(sed -n 2p old.checkpoint)`: "$OLD_SIZE",
	`$(sed -n 2p new.checkpoint)`: "$NEW_SIZE",
}

// TestREADMECommandsAreInTheScripts fails when a README walkthrough and its
// script drift apart: a command line of the README that its script does not
// run, in order, after the rewrites; a section with a ```sh block that
// readmeSections does not name; or an entry of readmeSections or
// notScripted that the README no longer has.
func TestREADMECommandsAreInTheScripts(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string][]string{} // script → its command lines
	next := map[string]int{}         // script → where the next README line is looked for
	named := map[string]bool{}       // readmeSections' headings the README has
	notScriptedSeen := map[string]bool{}
	for _, section := range shSections(string(raw)) {
		i := slices.IndexFunc(readmeSections, func(s readmeSection) bool { return strings.HasPrefix(section.heading, s.heading) })
		if i < 0 {
			t.Errorf("README section %q has a sh block that readmeSections does not name: give it a script, or say why not", section.heading)
			continue
		}
		want := readmeSections[i]
		named[want.heading] = true
		if want.script == "" {
			t.Logf("README section %q is not scripted: %s", section.heading, want.why)
			continue
		}
		if _, ok := scripts[want.script]; !ok {
			scripts[want.script] = scriptCommands(t, filepath.Join("testdata/script", want.script))
		}
		for _, line := range section.commands {
			if _, ok := notScripted[line]; ok {
				notScriptedSeen[line] = true
				continue
			}
			rewritten, err := scriptLinesOf(line)
			if err != nil {
				t.Errorf("README section %q: %v", want.heading, err)
				continue
			}
			for _, r := range rewritten {
				at := slices.Index(scripts[want.script][next[want.script]:], r)
				if at < 0 {
					t.Errorf("README section %q runs\n\t%s\nwhich testdata/script/%s does not run as\n\t%s\nafter its line %q (change the script with the README)",
						want.heading, line, want.script, r, lineBefore(scripts[want.script], next[want.script]))
					continue
				}
				next[want.script] += at + 1
			}
		}
	}
	for _, s := range readmeSections {
		if !named[s.heading] {
			t.Errorf("readmeSections names %q, which is no README section with a sh block", s.heading)
		}
	}
	for line := range notScripted {
		if !notScriptedSeen[line] {
			t.Errorf("notScripted names %q, which no scripted README section runs", line)
		}
	}
}

// shSection is a README section's heading and the command lines of its
// ```sh blocks.
type shSection struct {
	heading  string
	commands []string
}

// shSections returns, in order, the "## " sections of a README that have a
// ```sh block, with their command lines: a line continued with \ joined to
// the next, then split into its commands by commandsOf.
func shSections(readme string) []shSection {
	var out []shSection
	for _, section := range strings.Split(readme, "\n## ")[1:] {
		heading, body, _ := strings.Cut(section, "\n")
		blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(body, -1)
		if len(blocks) == 0 {
			continue
		}
		s := shSection{heading: heading}
		for _, m := range blocks {
			block := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(m[1], "")
			for _, line := range strings.Split(block, "\n") {
				s.commands = append(s.commands, commandsOf(line)...)
			}
		}
		out = append(out, s)
	}
	return out
}

// commandsOf splits a shell line into its commands, trimmed: it drops a #
// comment and splits at ;, neither inside quotes.
func commandsOf(line string) []string {
	var cmds []string
	var quote byte
	start := 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			line = line[:i] // and the loop ends
		case c == ';':
			cmds = append(cmds, line[start:i])
			start = i + 1
		}
	}
	cmds = append(cmds, line[start:])
	var out []string
	for _, c := range cmds {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// The rewrites of scriptLinesOf that apply to a whole command, in order.
var (
	echoVar     = regexp.MustCompile(`^echo "\$\w+"$`)
	exportVar   = regexp.MustCompile(`^export (\w+=.*)$`)
	unsetVar    = regexp.MustCompile(`^unset (\w+)$`)
	sedIntoVar  = regexp.MustCompile(`^(\w+)=\$\(echo "\$\w+" \| sed -n 's/(.*)/\\1/p'\)$`)
	outputIntoV = regexp.MustCompile(`^\w+=\$\((.*)\)$`)
	runsAnnal   = regexp.MustCompile(`^(?:go run \./cmd/)?(annal|annald|annal-verify) `)
	shellVar    = regexp.MustCompile(`^\$\w+$`)
)

// scriptLinesOf rewrites one README command into the script's lines:
//
//	echo "$X"                             none: the script asserts on the output
//	export N=V, unset N                   env N=V, env N=
//	N=$(echo "$X" | sed -n 's/RE/\1/p')   capture N stdout 'RE' (\( \) as ( ))
//	N=$(COMMAND)                          COMMAND, rewritten (a capture reads its stdout)
//	go run ./cmd/NAME ARGS, annal ARGS    exec NAME ARGS, exec annal ARGS, by rewriteWords
//
// A command that keeps shell syntax testscript lacks is an error.
func scriptLinesOf(cmd string) ([]string, error) {
	switch {
	case echoVar.MatchString(cmd):
		return nil, nil
	case exportVar.MatchString(cmd):
		return []string{exportVar.ReplaceAllString(cmd, "env $1")}, nil
	case unsetVar.MatchString(cmd):
		return []string{unsetVar.ReplaceAllString(cmd, "env $1=")}, nil
	case sedIntoVar.MatchString(cmd):
		m := sedIntoVar.FindStringSubmatch(cmd)
		re := strings.NewReplacer(`\(`, "(", `\)`, ")").Replace(m[2])
		return []string{"capture " + m[1] + " stdout '" + strings.ReplaceAll(re, "'", "''") + "'"}, nil
	case outputIntoV.MatchString(cmd):
		return scriptLinesOf(outputIntoV.FindStringSubmatch(cmd)[1])
	case !runsAnnal.MatchString(cmd):
		return nil, fmt.Errorf("%q runs no annal binary: add a rewrite, or name it in notScripted", cmd)
	}
	line, err := rewriteWords(runsAnnal.ReplaceAllString(cmd, "exec $1 "))
	if err != nil {
		return nil, fmt.Errorf("%q: %v", cmd, err)
	}
	return []string{line}, nil
}

// rewriteWords rewrites a command's words: http://127.0.0.1:7420 outside
// quotes as $ANNAL_SERVER, each double-quoted word by quotedWord, and a
// single-quoted word kept as it is.
func rewriteWords(line string) (string, error) {
	var out strings.Builder
	for rest := line; rest != ""; {
		quote := strings.IndexAny(rest, `'"`)
		if quote < 0 {
			quote = len(rest)
		}
		plain := rest[:quote]
		if strings.ContainsAny(plain, "`") || strings.Contains(plain, "$(") {
			return "", fmt.Errorf("a command substitution outside quotes: add a rewrite")
		}
		out.WriteString(strings.ReplaceAll(plain, "http://127.0.0.1:7420", "$ANNAL_SERVER"))
		rest = rest[quote:]
		if rest == "" {
			break
		}
		end := strings.IndexByte(rest[1:], rest[0])
		if end < 0 {
			return "", fmt.Errorf("an unclosed quote")
		}
		word := rest[:end+2]
		rest = rest[end+2:]
		if word[0] == '"' {
			var err error
			if word, err = quotedWord(word[1 : len(word)-1]); err != nil {
				return "", err
			}
		}
		out.WriteString(word)
	}
	return out.String(), nil
}

// quotedWord rewrites the text of a double-quoted word into testscript's:
//
//	"$(cat F)", "$(sed -n 2p F)"   the variable of shellValues
//	"$N"                           $N
//	"TEXT"                         'TEXT'
func quotedWord(text string) (string, error) {
	if v, ok := shellValues[text]; ok {
		return v, nil
	}
	if shellVar.MatchString(text) {
		return text, nil
	}
	if strings.ContainsAny(text, "$'\\`") {
		return "", fmt.Errorf("no rewrite for \"%s\": add one (a command substitution to shellValues)", text)
	}
	return "'" + text + "'", nil
}

// backgrounded is testscript's mark of a command run in the background.
var backgrounded = regexp.MustCompile(` &(\w+&)?$`)

// scriptCommands returns a script's command lines, without comments, and a
// background command's as started (a command that never ends by itself,
// such as annal tail -f, runs in the background and is killed: "! exec X &").
func scriptCommands(t *testing.T, path string) []string {
	t.Helper()
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(a.Comment), "\n") {
		line = strings.TrimSpace(scriptComment.ReplaceAllString(line, "$1"))
		if loc := backgrounded.FindStringIndex(line); loc != nil {
			line = strings.TrimPrefix(line[:loc[0]], "! ")
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// scriptComment matches a line with a testscript comment: from a # outside
// single quotes (the only quotes testscript has) to the end.
var scriptComment = regexp.MustCompile(`^((?:[^'#]|'[^']*')*)#.*$`)

// lineBefore names the script line after which the next README line is
// looked for.
func lineBefore(lines []string, next int) string {
	if next == 0 {
		return "(the start)"
	}
	return lines[next-1]
}

// TestREADMERewrites: a README line split into its commands, each rewrite,
// and the shell that has none.
func TestREADMERewrites(t *testing.T) {
	got := commandsOf(`annal whoami; annal erase x --reason "request #881; 2"   # as root`)
	if want := []string{"annal whoami", `annal erase x --reason "request #881; 2"`}; !slices.Equal(got, want) {
		t.Errorf("commandsOf = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		readme string
		script []string // nil: no line, or an error
		err    bool
	}{
		{`echo "$RECEIPT"`, nil, false},
		{`export ANNAL_CREDENTIAL=$AGENT_CREDENTIAL`, []string{`env ANNAL_CREDENTIAL=$AGENT_CREDENTIAL`}, false},
		{`unset ANNAL_CREDENTIAL`, []string{`env ANNAL_CREDENTIAL=`}, false},
		{`I=$(echo "$RECEIPT" | sed -n 's/^  "index": \([0-9]*\),*$/\1/p')`, []string{`capture I stdout '^  "index": ([0-9]*),*$'`}, false},
		{`HELD=$(go run ./cmd/annal submit --type mutate --target "a b")`, []string{`exec annal submit --type mutate --target 'a b'`}, false},
		{`annal history --actor "$AGENT" --payload '{"a":"b"}'`, []string{`exec annal history --actor $AGENT --payload '{"a":"b"}'`}, false},
		{`go run ./cmd/annal-verify proof --key "$(cat annal-data/log.pub)" x`, []string{`exec annal-verify proof --key $LOG_PUB x`}, false},
		{`go run ./cmd/annald audit --url http://127.0.0.1:7420/`, []string{`exec annald audit --url $ANNAL_SERVER/`}, false},
		{`go run ./cmd/annal export --to "$(wc -l x)"`, nil, true},
		{`go run ./cmd/annal export --to $(wc -l x)`, nil, true},
		{`go run ./cmd/annal export --reason "it's"`, nil, true},
		{`cat > policy.txt <<EOF`, nil, true},
	} {
		got, err := scriptLinesOf(tc.readme)
		if (err != nil) != tc.err || !slices.Equal(got, tc.script) {
			t.Errorf("scriptLinesOf(%s) = %q, %v; want %q, error %v", tc.readme, got, err, tc.script, tc.err)
		}
	}
}
