package session

// BackendQueue is the task queue served by every worker that can create
// sandboxes of the named backend, for sessions on the given session task
// queue. Host-bound sandboxes then move to the holding worker's own queue
// (Handle.TaskQueue, see HostQueue).
func BackendQueue(taskQueue, backend string) string { return taskQueue + "-backend-" + backend }

// HostQueue is the task queue of one worker host.
func HostQueue(taskQueue, hostID string) string { return taskQueue + "-host-" + hostID }
