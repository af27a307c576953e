// Package process runs the child processes of polyop's tests — the host,
// sidecars, the polyop command — with their output kept (Process.Output),
// mirrored to the test log line by line, and optionally written to a file;
// WaitForOutput waits for a line, Signal pauses and resumes, Stop and Kill
// end them.
package process
