// Package fakehttp holds what the project's wire-level fakes share.
package fakehttp

import "net/http"

// StatusRecorder remembers the status a handler wrote, so a fake can log
// "METHOD PATH STATUS" for every call; flushes and other capabilities pass
// through Unwrap (http.ResponseController).
type StatusRecorder struct {
	http.ResponseWriter
	// Status is the code written (200 once a body was written without one,
	// 0 before anything was).
	Status int
}

// WriteHeader implements http.ResponseWriter.
func (r *StatusRecorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (r *StatusRecorder) Write(p []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
