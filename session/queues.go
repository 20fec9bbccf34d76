package session

// BackendQueue is the task queue served by every worker that can create
// sandboxes of the named backend, for sessions on the given session task
// queue. Host-bound sandboxes then move to the holding worker's own queue
// (Handle.TaskQueue, see HostQueue).
func BackendQueue(taskQueue, backend string) string { return taskQueue + "-backend-" + backend }

// HostQueue is the task queue of one worker host.
func HostQueue(taskQueue, hostID string) string { return taskQueue + "-host-" + hostID }

// RepoQueue is the task queue of the repository loop's activities (clone,
// diff, push): served only by workers that have a git binary, so a fleet
// that mixes images (the scratch docker-backend worker has none) never
// hands a clone to a worker that cannot run it.
func RepoQueue(taskQueue string) string { return taskQueue + "-repo" }
