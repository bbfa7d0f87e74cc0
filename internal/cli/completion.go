package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// bashCompletion completes raftmaster's commands and flags in bash: it
// asks the binary itself (--generate-bash-completion) for the words that
// may follow those typed so far.
const bashCompletion = `# bash completion for raftmaster: source <(raftmaster completion bash)
_raftmaster_bash_autocomplete() {
  local cur words cword opts requestComp
  COMPREPLY=()
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion -n "=:" || return
  else
    cur="${COMP_WORDS[COMP_CWORD]}"
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi
  words=("${words[@]:0:$cword}")
  if [[ "$cur" == "-"* ]]; then
    requestComp="${words[*]} ${cur} --generate-bash-completion"
  else
    requestComp="${words[*]} --generate-bash-completion"
  fi
  opts=$(eval "${requestComp}" 2>/dev/null)
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}

complete -o bashdefault -o default -o nospace -F _raftmaster_bash_autocomplete raftmaster
`

// zshCompletion is bashCompletion for zsh.
const zshCompletion = `#compdef raftmaster
# zsh completion for raftmaster: source <(raftmaster completion zsh)

_raftmaster_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _raftmaster_zsh_autocomplete raftmaster
`

func completionCommand() *cli.Command {
	script := func(s string) cli.ActionFunc {
		return func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("completion %s takes no arguments", c.Command.Name)
			}
			_, err := io.WriteString(c.App.Writer, s)
			return err
		}
	}
	return &cli.Command{
		Name:  "completion",
		Usage: "print the shell completion script for bash or zsh",
		UsageText: "raftmaster completion bash|zsh\n\n" +
			"bash:  source <(raftmaster completion bash)    # or save it in /etc/bash_completion.d/raftmaster\n" +
			"zsh:   source <(raftmaster completion zsh)     # after compinit; or save it as _raftmaster in $fpath",
		Description: "The script completes commands, subcommands and flags by asking the raftmaster\n" +
			"on the PATH, so it stays right across upgrades.",
		Subcommands: []*cli.Command{
			{Name: "bash", Usage: "print the bash completion script", Action: script(bashCompletion)},
			{Name: "zsh", Usage: "print the zsh completion script", Action: script(zshCompletion)},
		},
	}
}
