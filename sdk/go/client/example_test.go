package client_test

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/sdk/go/client"
)

func Example() {
	// In a sidecar, sidecar.Server.GetClient returns a client of this kind,
	// connected to the address the host announces.
	c, err := client.New(client.Options{Address: "unix:///var/run/polyop/cluster.sock"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	var d appsv1.Deployment
	var source client.Source
	err = c.Get(context.Background(), ctrlclient.ObjectKey{Namespace: "default", Name: "web"}, &d, client.RecordSource(&source))
	switch {
	case apierrors.IsNotFound(err):
		fmt.Println("no deployment default/web")
	case err != nil:
		fmt.Println("reading default/web:", err)
	default:
		fmt.Printf("default/web wants %d replicas (read from the %s)\n", *d.Spec.Replicas, source)
	}
}
