// Package repo moves a repository between GitHub (or any git server) and a
// session's workspace on the worker's side of the trust boundary: it clones
// a repository into a fresh directory the agent will then own, compares two
// workspace trees as a git patch, scans changed files for secrets, and
// commits an agent's work tree on top of a known commit and pushes it.
//
// The worker holds the GitHub token; the workspace files are written by the
// agent and are untrusted. Everything here is built around keeping the two
// apart:
//
//   - git runs from the CLI with none of the worker's environment or
//     configuration (see Git), so nothing in the worker's home, /etc/gitconfig
//     or environment changes what a call does;
//   - the token reaches git only through the environment of one call, as an
//     http.extraHeader, never in argv, a URL or a file (see Auth), and
//     git's stderr is scrubbed of it before it goes into an error;
//   - an untrusted tree is only ever read as data: no .git directory, hook,
//     config, attribute driver or fsmonitor from it is used, and commits are
//     made in a fresh repository the worker created (see CommitAndPush).
//
// Failures that a chat user can act on come back as *Error, with a Kind to
// branch on and a Msg to show.
package repo
