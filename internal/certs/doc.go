// Package certs gives the host's webhook server a certificate without
// ceremony, for local runs and for clusters without cert-manager.
//
// With cert-manager (or any other issuer) the host serves the certificate
// mounted in its cert dir, and the issuer's CA injector fills in the caBundle
// of the webhook configurations. Without one, the host makes its own:
//
//   - NewCA and NewServingCert make a CA and a serving certificate it signs
//     (ECDSA P-256), for the webhook Service's DNS names and any extra hosts;
//   - Provisioner keeps them in a Secret (kubernetes.io/tls, with ca.crt and
//     the CA's key, ca.key), so that every replica serves the same chain and a
//     restart keeps it; it renews the serving certificate well before it
//     expires, or when the hosts change, and writes the files to the cert dir
//     the webhook server's certwatcher watches (written by rename, so the
//     watcher never reads half a file);
//   - Injector patches the caBundle of the webhook configurations and CRD
//     conversion stanzas the host owns whenever it differs, so the API server
//     trusts the CA.
//
// EnsureFiles is the last resort of a host started with a cert dir that holds
// no certificate and without --webhook-self-signed: it makes a CA and a
// certificate in the cert dir alone, so a local run serves at all.
package certs
