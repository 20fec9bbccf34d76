// Package app is what cmd/worker, cmd/bot and cmd/dev share: Connect
// (configuration, logging and the Temporal client), the health and metrics
// server, and sandbot's search attributes. Each process is assembled in
// its own package, internal/workerapp or internal/botapp, so that a binary
// links only what it runs; this package therefore imports no adapter,
// backend, model client or workflow.
package app
