package hostcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/manifests"
)

// runRBAC prints the RBAC the host needs for what the sidecar declares.
func runRBAC(args []string) error {
	fs := flag.NewFlagSet("host rbac", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: host rbac [flags]

Prints, as YAML, the RBAC the host needs for what the sidecar declares (read on
every reconciled, owned and watched kind; status, finalizers and children
written; events recorded), bound to the host's ServiceAccount:

  - for a controller limited to namespaces (those it declares, narrowed by
    --namespace as the host's own flag narrows them), a Role and RoleBinding in
    each of its namespaces;
  - for a controller that watches every namespace, and for cluster-scoped
    kinds, a ClusterRole and ClusterRoleBinding;
  - with --leader-election, a Role and RoleBinding for the leader election
    lease in --service-account-namespace;
  - with --sharding (or --sharding=labels), patch on each reconciled kind (the
    shard labels) and that Role on leases (each replica's Lease in the ring),
    for the host's --sharding=labels; with --sharding=server, that Role on
    leases only, for the host's --sharding=server.

Pass the host's --namespace flags here too, so that a host scoped to a
namespace is granted nothing outside it.

Resources are resolved through API discovery with --kubeconfig; without it they
are guessed from the kinds (lower case, plural), which is right for nearly every
kind, and the output says so.

Flags:`)
		fs.PrintDefaults()
	}
	var src descriptionSource
	src.bindFlags(fs)
	var opts manifests.RBACOptions
	var namespaces []string
	var kubeconfig string
	fs.StringVar(&opts.Name, "name", "", "The name of the ClusterRole, the Roles and their bindings, and the prefix of the leader election Role (default: the sidecar's name).")
	fs.Func("namespace", "The host's --namespace: the host watches only this namespace; repeat the flag or separate with commas for several. "+
		"Rules are then granted in Roles of these namespaces, not cluster-wide.", func(v string) error {
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns == "" {
				return fmt.Errorf("empty namespace in %q", v)
			}
			namespaces = append(namespaces, ns)
		}
		return nil
	})
	fs.StringVar(&opts.Namespace, "service-account-namespace", "", "The namespace the host runs in: its ServiceAccount's and its leader election lease's "+
		`(default: the one --namespace, when there is one, else "default").`)
	fs.StringVar(&opts.ServiceAccount, "service-account", "", "The host's ServiceAccount (default: --name).")
	fs.BoolVar(&opts.LeaderElection, "leader-election", true, "Add a Role for the leader election lease (the host's --leader-elect).")
	fs.Var((*shardingFlag)(&opts.Sharding), "sharding", "Add what the host's --sharding needs: --sharding or --sharding=labels, patch on each reconciled kind and the Role on leases; "+
		"--sharding=server, the Role on leases.")
	fs.BoolVar(&opts.MetricsAuth, "metrics-auth", false, "Add the rules the secure metrics endpoint needs (the host's --metrics-secure with metrics served).")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Resolve resources through the discovery of the API server this kubeconfig names (default: guess them from the kinds).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("host rbac: unexpected arguments %q", fs.Args())
	}
	if opts.Namespace == "" && len(namespaces) == 1 {
		opts.Namespace = namespaces[0]
	}

	_, desc, err := src.load(context.Background())
	if err != nil {
		return err
	}
	if len(desc.Controllers) == 0 {
		return errors.New("host rbac: the sidecar declares no controllers")
	}
	mapper := description.GuessingMapper(desc)
	if kubeconfig != "" {
		if mapper, err = discoveryMapper(kubeconfig); err != nil {
			return err
		}
	}
	// RBAC concerns the controllers' kinds: webhooks and conversions are the
	// API server's calls to the host, and need no rule.
	res, err := description.Resolve(mapper, desc, description.ResolveOptions{Namespaces: namespaces, WebhooksOff: true})
	if err != nil {
		return fmt.Errorf("host rbac: %w", err)
	}
	objs, err := manifests.RBAC(res, opts)
	if err != nil {
		return fmt.Errorf("host rbac: %w", err)
	}
	source := "resolved through the API server's discovery"
	if kubeconfig == "" {
		source = "guessed from the kinds; pass --kubeconfig to resolve them through discovery"
	}
	fmt.Printf("# RBAC of the polyop host for sidecar %q, derived from its description (resources %s).\n", desc.Name, source)
	return manifests.WriteYAML(os.Stdout, objs)
}

// discoveryMapper maps kinds through the discovery of the API server a
// kubeconfig names.
func discoveryMapper(kubeconfig string) (meta.RESTMapper, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("host rbac: --kubeconfig: %w", err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("host rbac: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("host rbac: discovery: %w", err)
	}
	return mapper, nil
}

// shardingFlag is host rbac's --sharding: alone it means labels (as when it
// was a boolean), or it names the host's mode, labels or server.
type shardingFlag string

func (f *shardingFlag) String() string { return string(*f) }

func (f *shardingFlag) IsBoolFlag() bool { return true }

func (f *shardingFlag) Set(v string) error {
	switch v {
	case "true", manifests.ShardingLabels:
		*f = manifests.ShardingLabels
	case "false":
		*f = ""
	case manifests.ShardingServer:
		*f = manifests.ShardingServer
	default:
		return fmt.Errorf("the host's sharding modes are %s and %s", manifests.ShardingLabels, manifests.ShardingServer)
	}
	return nil
}
