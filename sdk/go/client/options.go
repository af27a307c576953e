package client

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Source says where a read was served from.
type Source string

const (
	// SourceUnknown: the host did not say.
	SourceUnknown Source = ""
	// SourceCache: the host's informer cache, eventually consistent.
	SourceCache Source = "Cache"
	// SourceAPIServer: the API server, directly.
	SourceAPIServer Source = "APIServer"
)

func sourceOf(s polyopv1alpha1.ReadSource) Source {
	switch s {
	case polyopv1alpha1.ReadSource_READ_SOURCE_CACHE:
		return SourceCache
	case polyopv1alpha1.ReadSource_READ_SOURCE_API_SERVER:
		return SourceAPIServer
	default:
		return SourceUnknown
	}
}

// ReadOption is an option of Get and List that only a Client understands.
// Other clients ignore it, so a reconciler that passes one still runs with
// controller-runtime's own client.
type ReadOption interface {
	ctrlclient.GetOption
	ctrlclient.ListOption
	readOption()
}

// Uncached makes a Get or List read from the API server even when the host
// caches the kind: a quorum read, for when the cache may be behind (right
// after a write, for example). Without it, the host reads from its cache the
// kinds it watches.
var Uncached ReadOption = uncached{}

type uncached struct{}

func (uncached) ApplyToGet(*ctrlclient.GetOptions)   {}
func (uncached) ApplyToList(*ctrlclient.ListOptions) {}
func (uncached) readOption()                         {}

// RecordSource stores in *dst where a Get or List was served from, the
// host's cache or the API server, once the read succeeds.
func RecordSource(dst *Source) ReadOption { return recordSource{dst: dst} }

type recordSource struct{ dst *Source }

func (recordSource) ApplyToGet(*ctrlclient.GetOptions)   {}
func (recordSource) ApplyToList(*ctrlclient.ListOptions) {}
func (recordSource) readOption()                         {}

// readOptions are the Client's own read options found among a call's options.
type readOptions struct {
	uncached bool
	sources  []*Source
}

func (r *readOptions) add(opt any) {
	switch o := opt.(type) {
	case uncached:
		r.uncached = true
	case recordSource:
		if o.dst != nil {
			r.sources = append(r.sources, o.dst)
		}
	}
}

// proto is the ReadOptions of the request; nil when every option has its
// default.
func (r *readOptions) proto() *polyopv1alpha1.ReadOptions {
	if !r.uncached {
		return nil
	}
	return &polyopv1alpha1.ReadOptions{Uncached: true}
}

func (r *readOptions) record(s polyopv1alpha1.ReadSource) {
	for _, dst := range r.sources {
		*dst = sourceOf(s)
	}
}

// writeOptions builds the WriteOptions of a write from controller-runtime's
// dry-run, field manager and (for apply) force options.
func (c *Client) writeOptions(dryRun []string, fieldManager string, force bool) *polyopv1alpha1.WriteOptions {
	if fieldManager == "" {
		fieldManager = c.fieldOwner
	}
	opts := &polyopv1alpha1.WriteOptions{FieldManager: fieldManager, Force: force}
	for _, d := range dryRun {
		if d == metav1.DryRunAll {
			opts.DryRun = true
		}
	}
	return opts
}
