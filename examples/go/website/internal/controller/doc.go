// Package controller holds the Website reconciler, a declarative one: it
// returns the Website's children (a ConfigMap, a Deployment and a Service) as
// desired objects, and the polyop host applies them, owns them to the Website
// and prunes those no longer desired.
package controller
