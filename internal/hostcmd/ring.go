package hostcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/ring"
)

// listPageSize is how many objects each list request of `host ring --kind`
// asks for: the API server's pages keep its memory and the command's bounded
// on large kinds.
const listPageSize = 500

// ringOptions are the flags of `host ring`.
type ringOptions struct {
	ring, namespace         string
	kind, objectsNamespace  string
	kubeconfig, kubeContext string
	virtualNodes            int
}

// runRing prints a sharded host's ring as the API server's Leases make it,
// and optionally how a kind's objects are assigned by it.
func runRing(args []string) error {
	fs := flag.NewFlagSet("host ring", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: host ring --ring NAME [flags]

Prints the ring of a sharded host as every replica computes it, reading only:
the replicas' Leases (labelled sharding.polyop.dev/ring=NAME) with their holder,
last renewal and expiry, and each live member's share of the hash space.

With --kind, it also lists that kind's objects (their metadata only) and prints
how many each live member owns by the ring and how many carry its shard label
(shard.sharding.polyop.dev/NAME), then how many objects have no shard label
(unassigned) and how many are labelled with another replica than the ring's
owner (misassigned): both should fall to 0 shortly after the ring changes.

Flags:`)
		fs.PrintDefaults()
	}
	var o ringOptions
	fs.StringVar(&o.ring, "ring", "", "The ring: the sidecar's name. Required.")
	fs.StringVar(&o.namespace, "namespace", "", "The namespace of the ring's Leases: the host's (default: the kubeconfig context's namespace; in a pod, the pod's).")
	fs.StringVar(&o.kind, "kind", "", "Count the objects of this kind each member owns, as group/version/Kind (v1/Kind for the core group), e.g. apps/v1/Deployment.")
	fs.StringVar(&o.objectsNamespace, "objects-namespace", "", "Count only the objects of --kind in this namespace (default: every namespace).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account).")
	fs.StringVar(&o.kubeContext, "context", "", "The kubeconfig context (default: its current context).")
	fs.IntVar(&o.virtualNodes, "virtual-nodes", ring.DefaultVirtualNodes, "The points each member places on the ring, as the ring's hosts do.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("host ring: unexpected arguments %q", fs.Args())
	}
	if o.ring == "" {
		return errors.New("host ring: --ring is required: the ring's name is the sidecar's name")
	}
	if o.objectsNamespace != "" && o.kind == "" {
		return errors.New("host ring: --objects-namespace counts objects of --kind: give --kind too")
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{CurrentContext: o.kubeContext})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("host ring: loading the kubeconfig: %w", err)
	}
	if o.namespace == "" {
		if o.namespace, _, err = loader.Namespace(); err != nil {
			return fmt.Errorf("host ring: the kubeconfig's namespace: %w (pass --namespace)", err)
		}
	}
	return printRing(context.Background(), os.Stdout, cfg, o, time.Now())
}

// objectCounts is how a kind's objects are assigned.
type objectCounts struct {
	gvk         schema.GroupVersionKind
	total       int
	owned       map[string]int // by the ring's owner
	labelled    map[string]int // by shard label
	unassigned  int            // no shard label
	misassigned int            // a shard label other than the ring's owner
}

// printRing prints the ring of the Leases at now, and the objects of o.kind.
func printRing(ctx context.Context, w io.Writer, cfg *rest.Config, o ringOptions, now time.Time) error {
	cs, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("host ring: %w", err)
	}
	list, err := cs.Leases(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: membership.Selector(o.ring).String()})
	if err != nil {
		return fmt.Errorf("host ring: listing the Leases of ring %s in namespace %s: %w", o.ring, o.namespace, err)
	}
	leases := membership.Leases(list.Items)
	live, _ := membership.LiveMembers(leases, now)
	r := ring.New(live, o.virtualNodes)

	var counts *objectCounts
	if o.kind != "" {
		if counts, err = countObjects(ctx, cfg, o, r); err != nil {
			return fmt.Errorf("host ring: %w", err)
		}
	}

	fmt.Fprintf(w, "Ring %s: %d live members, from %d Leases labelled %s=%s in namespace %s, at %s.\n\n",
		o.ring, len(live), len(leases), sharding.RingLabel, o.ring, o.namespace, now.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "MEMBER\tLEASE\tRENEWED\tEXPIRES IN\tSHARE"
	if counts != nil {
		header += "\tOWNED\tLABELLED"
	}
	fmt.Fprintln(tw, header)
	for _, l := range leases {
		expires, share := l.Expires.Sub(now).Round(time.Second).String(), "-"
		if l.Live(now) {
			share = fmt.Sprintf("%.1f%%", 100*membership.Share(r, l.Holder))
		} else {
			expires = "expired " + now.Sub(l.Expires).Round(time.Second).String() + " ago"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", l.Holder, l.Lease, l.RenewTime.UTC().Format(time.RFC3339), expires, share)
		if counts != nil {
			row += fmt.Sprintf("\t%d\t%d", counts.owned[l.Holder], counts.labelled[l.Holder])
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(live) == 0 {
		fmt.Fprintln(w, "\nNo member is live: no replica owns anything.")
	}
	if counts != nil {
		where := "every namespace"
		if o.objectsNamespace != "" {
			where = "namespace " + o.objectsNamespace
		}
		fmt.Fprintf(w, "\n%s in %s: %d objects; %d unassigned (without the label %s), %d misassigned (labelled with another replica than the ring's owner).\n",
			counts.gvk.Kind, where, counts.total, counts.unassigned, sharding.ShardLabel(o.ring), counts.misassigned)
	}
	return nil
}

// countObjects lists the metadata of the objects of o.kind and counts how the
// ring and their shard labels assign them.
func countObjects(ctx context.Context, cfg *rest.Config, o ringOptions, r *ring.Ring) (*objectCounts, error) {
	gvk, err := parseKind(o.kind)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("--kind %s: %w", o.kind, err)
	}
	if o.objectsNamespace != "" && mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("--objects-namespace %s: %s is cluster-scoped", o.objectsNamespace, gvk.Kind)
	}
	mc, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	label := sharding.ShardLabel(o.ring)
	c := &objectCounts{gvk: gvk, owned: map[string]int{}, labelled: map[string]int{}}
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		page, err := mc.Resource(mapping.Resource).Namespace(o.objectsNamespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", mapping.Resource.String(), err)
		}
		for i := range page.Items {
			obj := &page.Items[i]
			c.total++
			owner := r.OwnerOf(obj.UID)
			if owner != "" {
				c.owned[owner]++
			}
			switch shard := obj.Labels[label]; {
			case shard == "":
				c.unassigned++
			case shard != owner:
				c.labelled[shard]++
				c.misassigned++
			default:
				c.labelled[shard]++
			}
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return c, nil
		}
	}
}

// parseKind parses group/version/Kind, or version/Kind for the core group.
func parseKind(s string) (schema.GroupVersionKind, error) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}, nil
	case len(parts) == 3 && parts[1] != "" && parts[2] != "":
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("--kind %q is not group/version/Kind (or v1/Kind for the core group), e.g. apps/v1/Deployment", s)
}
