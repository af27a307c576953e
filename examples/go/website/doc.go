// Command website is a polyop sidecar that serves Websites
// (examples.polyop.dev/v1): the files of a ConfigMap, served by nginx.
//
// The controller is declarative: for every Website it returns the desired
// children (a ConfigMap with the published content, a Deployment of nginx
// pods and a Service) and the host applies them with server-side apply,
// makes the Website their controller owner and deletes those no longer
// desired. The host watches the content ConfigMaps through the field
// spec.configMapName, so that editing the content reconciles the Websites
// that serve it and rolls their pods.
//
// Usage:
//
//	website [--address unix:///var/run/polyop/sidecar.sock] [--max-message-size 64Mi] [--zap-log-level info]
package main
