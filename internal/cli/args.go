package cli

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionFlag is the flag that asks urfave/cli for the completions of
// the words before it; it must stay last.
const completionFlag = "--generate-bash-completion"

// normalizeArgs lets flags stand anywhere on the command line: urfave/cli
// accepts a flag only after the name of the command that defines it and
// before the first argument. It returns args with each flag (and its
// value) moved after the innermost command of the line that defines it,
// and the arguments after the flags, so that
//
//	raftmaster job inspect JOB --json --addr HOST:PORT
//	raftmaster --addr HOST:PORT job inspect --json JOB
//
// both read as "raftmaster job inspect --json --addr HOST:PORT JOB". A
// flag that no command of the line defines is left with the last command,
// which rejects it. Everything after "--" is an argument. A word where a
// command name is due that names no command is an error that suggests the
// nearest names.
func normalizeArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	if args[len(args)-1] == completionFlag {
		return completionArgs(args)
	}
	type flagWords struct {
		name  string
		words []string
	}
	levels := [][]cli.Flag{app.Flags} // the flags of the app, then of each command on the line
	subs := app.Commands              // the subcommands of the innermost command so far
	group := app.Action == nil        // the innermost command only groups subcommands
	var path []string                 // the command names on the line
	var flags []flagWords
	var rest []string // the arguments
	help := false
	var helpPath []string // the commands the help command describes
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if help {
			// The names of the commands to describe.
			if len(a) > 0 && a[0] != '-' && len(subs) > 0 {
				cmd := findCommand(subs, a)
				if cmd == nil {
					where := strings.Join(append([]string{app.Name}, helpPath...), " ")
					return nil, fmt.Errorf("%q is not a command of %q%s (see %s --help)", a, where, suggestCommand(subs, a), where)
				}
				helpPath = append(helpPath, a)
				subs = cmd.Subcommands
			}
			rest = append(rest, a)
			continue
		}
		if len(a) > 1 && a[0] == '-' {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			fw := flagWords{name: name, words: []string{a}}
			f := findFlag(name, levels, subs)
			if f == nil {
				f = findFlag(name, nil, app.Commands) // another command's: it is refused, with its value
			}
			if !hasValue && f != nil && takesValue(f) && i+1 < len(args) {
				fw.words = append(fw.words, args[i+1])
				i++
			}
			flags = append(flags, fw)
			continue
		}
		if len(rest) == 0 && len(subs) > 0 {
			if a == "help" || a == "h" {
				// The help command takes command names as its arguments.
				helpPath = slices.Clone(path)
				path = append(path, a)
				levels = append(levels, nil)
				help = true
				continue
			}
			if cmd := findCommand(subs, a); cmd != nil {
				path = append(path, a)
				levels = append(levels, cmd.Flags)
				subs, group = cmd.Subcommands, cmd.Action == nil
				continue
			}
			if group {
				where := strings.Join(append([]string{app.Name}, path...), " ")
				return nil, fmt.Errorf("%q is not a command of %q%s (see %s --help)", a, where, suggestCommand(subs, a), where)
			}
		}
		rest = append(rest, a)
	}
	if help && len(flags) == 0 && len(rest) > 0 && len(rest) == len(helpPath)-(len(path)-1) {
		// "help job inspect" is "job inspect --help" (the help command
		// of urfave/cli would describe job alone).
		return append(append([]string{args[0]}, helpPath...), "--help"), nil
	}
	// at[i] are the flags that follow the i-th command (0: the app).
	at := make([][]string, len(levels))
	for _, fw := range flags {
		level := len(levels) - 1
		for l := len(levels) - 1; l >= 0; l-- {
			if hasFlag(levels[l], fw.name) || l == 0 && isAppOnlyFlag(fw.name) {
				level = l
				break
			}
		}
		at[level] = append(at[level], fw.words...)
	}
	out := []string{args[0]}
	out = append(out, at[0]...)
	for i, name := range path {
		out = append(out, name)
		out = append(out, at[i+1]...)
	}
	return append(out, rest...), nil
}

// errNoCompletion means that there is nothing to complete: the word being
// completed follows "--", so it is an argument.
var errNoCompletion = errors.New("nothing to complete after --")

// completionArgs returns the arguments of a completion request. urfave/cli
// does not complete a line with "--" in it, and runs the command instead,
// with the completion flag as an argument: a word "--" being completed is
// passed as "-" (urfave/cli reads the word itself from os.Args, and lists
// the long flags), and a request after a "--" is errNoCompletion.
func completionArgs(args []string) ([]string, error) {
	for i, a := range args {
		if a != "--" {
			continue
		}
		if i != len(args)-2 {
			return nil, errNoCompletion
		}
		out := slices.Clone(args)
		out[i] = "-"
		return out, nil
	}
	return args, nil
}

// isAppOnlyFlag reports whether name is one of the flags urfave/cli gives
// the app alone.
func isAppOnlyFlag(name string) bool { return name == "version" || name == "v" }

// findFlag returns the flag called name among levels, innermost first, or
// else among the subcommands below, so that its kind (whether it takes a
// value) is known before its command is.
func findFlag(name string, levels [][]cli.Flag, subs []*cli.Command) cli.Flag {
	for l := len(levels) - 1; l >= 0; l-- {
		for _, f := range levels[l] {
			if flagHasName(f, name) {
				return f
			}
		}
	}
	for _, cmd := range subs {
		for _, f := range cmd.Flags {
			if flagHasName(f, name) {
				return f
			}
		}
		if f := findFlag(name, nil, cmd.Subcommands); f != nil {
			return f
		}
	}
	return nil
}

func hasFlag(flags []cli.Flag, name string) bool {
	if name == "help" || name == "h" {
		return true
	}
	for _, f := range flags {
		if flagHasName(f, name) {
			return true
		}
	}
	return false
}

func flagHasName(f cli.Flag, name string) bool {
	for _, n := range f.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// takesValue reports whether f reads the word after it as its value.
func takesValue(f cli.Flag) bool {
	if v, ok := f.(cli.DocGenerationFlag); ok {
		return v.TakesValue()
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// suggestCommand returns `; did you mean "job"?` when names of cmds are
// close to typed (a prefix of it or it of them, or at most two edits
// away), and else the list of the commands.
func suggestCommand(cmds []*cli.Command, typed string) string {
	var near, all []string
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		all = append(all, c.Name)
		for _, n := range c.Names() {
			if strings.HasPrefix(n, typed) || strings.HasPrefix(typed, n) || editDistance(n, typed) <= 2 {
				near = append(near, c.Name)
				break
			}
		}
	}
	sort.Strings(all)
	if len(near) == 0 {
		return "; the commands are " + strings.Join(all, ", ")
	}
	for i, n := range near {
		near[i] = fmt.Sprintf("%q", n)
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
