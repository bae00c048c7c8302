package store

// SetHubQueue sets how far a watch may fall behind the hub, for a test
// that makes a slow watch leave it; the returned func restores it.
func SetHubQueue(n int) (restore func()) {
	old := hubQueue
	hubQueue = n
	return func() { hubQueue = old }
}
