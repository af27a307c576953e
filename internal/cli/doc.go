// Package cli holds the commands of polyop, the command-line tool for polyop
// operators: one file per command, each with a NewXCommand function that
// returns its cobra.Command, wired together by NewRootCommand and
// cmd/polyop. A command reads its flags and calls the package that does the
// work: scaffold (init, create, generate), run (polyop run), render (polyop
// render), hostcmd (polyop host).
//
// A command writes its result to cmd.OutOrStdout() and its diagnostics to
// cmd.ErrOrStderr(), and returns an error rather than exiting, so that it can
// be run in tests and composed by other commands.
package cli
