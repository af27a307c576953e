package index

// The helpers of bench_test.go that the external benchmarks of
// localcopy_bench_test.go (package index_test: it imports the cluster
// service, which imports this package) share.
var (
	FakeAPIServer = fakeAPIServer
	SyncedCache   = syncedCache
	HeapInUse     = heapInUse
	BenchGVK      = benchGVK
)

const BenchObjects = benchObjects
