package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docCommand is a command line README.md or a docs page shows.
type docCommand struct {
	file string
	line int
	bin  string // draxr, draxr-autoscaler, draxr-scheduler
	sub  string // draxr's subcommand, "" for the others
	text string
}

// invocation finds a draxr binary run on a line: bin/draxr, kubectl draxr,
// draxr-autoscaler, ... followed by what it is given.
var invocation = regexp.MustCompile(`(?:^|[\s` + "`" + `(])(?:(?:\./)?bin/)?(draxr-autoscaler|draxr-scheduler|draxr)((?:\s+[^\s` + "`" + `]+)*)`)

// word is a lower-case word: what a subcommand looks like.
var word = regexp.MustCompile(`^[a-z]+$`)

// codeSpan is inline code in Markdown.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// flagToken is a long flag as the docs write it: --name, --name=value.
var flagToken = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)`)

// docCommands collects the command lines of every binary in README.md and
// docs/*.md: lines of code blocks (backslash continuations joined) and
// inline code spans that start with a binary.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var out []docCommand
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		lines := strings.Split(string(data), "\n")
		fenced := false
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fenced = !fenced
				continue
			}
			var texts []string
			if fenced || strings.HasPrefix(l, "    ") {
				for strings.HasSuffix(strings.TrimSpace(l), `\`) && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(strings.TrimSpace(l), `\`) + " " + strings.TrimSpace(lines[i])
				}
				texts = []string{l}
			} else {
				for _, span := range codeSpan.FindAllStringSubmatch(l, -1) {
					texts = append(texts, span[1])
				}
			}
			for _, text := range texts {
				for _, m := range invocation.FindAllStringSubmatch(text, -1) {
					c := docCommand{file: name, line: i + 1, bin: m[1], text: strings.TrimSpace(m[0])}
					args := strings.Fields(m[2])
					if c.bin == "draxr" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
						c.sub = args[0]
					}
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// flagsOf lists the long flags a binary's help names.
func flagsOf(t *testing.T, bin string, args ...string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v --help: %v\n%s", filepath.Base(bin), args, err, out)
	}
	flags := map[string]bool{"help": true}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	return flags
}

// Every command README.md and the docs pages show runs as written: each
// draxr subcommand exists and every long flag given to a binary is one
// it has. A flag renamed or removed fails here, not in a user's terminal.
func TestDocsCommandsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	dir := t.TempDir()
	bins := map[string]string{"draxr": "./autoscaler/cmd/draxr", "draxr-autoscaler": "./autoscaler/cmd/draxr-autoscaler",
		"draxr-scheduler": "./scheduler/cmd/draxr-scheduler"}
	for name, pkg := range bins {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	flags := map[string]map[string]bool{}
	known := func(bin, sub string) map[string]bool {
		key := bin + " " + sub
		if f, ok := flags[key]; ok {
			return f
		}
		var args []string
		if sub != "" {
			args = []string{sub}
		}
		flags[key] = flagsOf(t, filepath.Join(dir, bin), args...)
		return flags[key]
	}
	valid := map[string]bool{"simulate": true, "capacity": true, "doctor": true, "dump": true, "completion": true, "help": true}
	commands := docCommands(t)
	checked := map[string]int{}
	for _, c := range commands {
		if c.bin == "draxr" && c.sub != "" && !valid[c.sub] {
			// "draxr is ...", "draxr's": prose, not a command.
			if word.MatchString(c.sub) && strings.Contains(c.text, " --") {
				t.Errorf("%s:%d: `%s`: draxr has no subcommand %q", c.file, c.line, c.text, c.sub)
			}
			continue
		}
		have := known(c.bin, c.sub)
		for _, tok := range strings.Fields(c.text) {
			// "[--flag value]": an optional flag, written as usage does.
			m := flagToken.FindStringSubmatch(strings.TrimLeft(tok, "[("))
			if m == nil {
				continue
			}
			checked[c.bin]++
			if !have[m[1]] {
				t.Errorf("%s:%d: `%s`: %s %s has no flag --%s", c.file, c.line, c.text, c.bin, c.sub, m[1])
			}
		}
	}
	var summary []string
	for bin, n := range checked {
		summary = append(summary, bin+"="+strconv.Itoa(n))
	}
	sort.Strings(summary)
	t.Logf("flags checked: %v", summary)
	if checked["draxr"] == 0 || checked["draxr-autoscaler"] == 0 {
		t.Errorf("no flag checked for draxr or draxr-autoscaler (%v): the docs' commands were not found", summary)
	}
}
