package multinode

// TailFile is the last max bytes of file, "" when it cannot be read: the
// end of a daemon's log, for a test's failure message. Tests that run
// their own daemons next to a Node's (internal/e2e) use it too.
func TailFile(file string, max int) string { return tail(file, max) }
