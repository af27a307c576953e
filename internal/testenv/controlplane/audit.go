package controlplane

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy is the API server's audit policy: the write requests of the
// audited users, with their bodies; nothing else.
func auditPolicy(users []string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: [%s]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`, strings.Join(quoted, ", "))
}

// configureAudit makes the API server write the audit log of users' writes
// into dir, and returns its path.
func configureAudit(env *envtest.Environment, dir string, users []string) (string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(users)), 0o600); err != nil {
		return "", err
	}
	log := filepath.Join(dir, "audit.log")
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", log)
	args.Set("audit-log-format", "json")
	// Each request is in the file when its response is sent.
	args.Set("audit-log-mode", "blocking")
	return log, nil
}

// AuditEvent is one write request of an audited user, as the API server's
// audit log has it.
type AuditEvent struct {
	User      string    // the user's name
	Verb      string    // create, update, patch, delete
	Resource  string    // the resource, e.g. "configmaps"
	Namespace string    // its namespace
	Name      string    // its name
	Sub       string    // the subresource, e.g. "status"
	Code      int       // the response's status code
	Received  time.Time // when the API server received the request
	// Body is the request's body.
	Body json.RawMessage
}

// Succeeded reports whether the API server carried the write out.
func (e AuditEvent) Succeeded() bool { return e.Code >= 200 && e.Code < 300 }

func (e AuditEvent) String() string {
	obj := e.Resource
	if e.Sub != "" {
		obj += "/" + e.Sub
	}
	return fmt.Sprintf("%s %s %s %s/%s (%d) at %s", e.User, e.Verb, obj, e.Namespace, e.Name, e.Code, e.Received.Format(time.RFC3339Nano))
}

// AuditLog reads the audit log of the users an Env was started with
// (Options.AuditUsers), in the order the API server wrote it.
func (e *Env) AuditLog() ([]AuditEvent, error) {
	if e.auditLog == "" {
		return nil, errors.New("the control plane was started without audited users (Options.AuditUsers)")
	}
	f, err := os.Open(e.auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var raw struct {
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			Verb      string `json:"verb"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
			RequestObject            json.RawMessage `json:"requestObject"`
		}
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("reading the audit log %s: %w", e.auditLog, err)
		}
		out = append(out, AuditEvent{
			User: raw.User.Username, Verb: raw.Verb,
			Resource: raw.ObjectRef.Resource, Namespace: raw.ObjectRef.Namespace, Name: raw.ObjectRef.Name, Sub: raw.ObjectRef.Subresource,
			Code: raw.ResponseStatus.Code, Received: raw.RequestReceivedTimestamp, Body: raw.RequestObject,
		})
	}
	return out, sc.Err()
}

// AddUser adds a user of the system:masters group, as the Env's admin is,
// under name (one of Options.AuditUsers, for its writes to be audited), and
// returns the path of its kubeconfig.
func (e *Env) AddUser(name string) (string, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, e.Config)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.dir, "kubeconfig-"+name)
	return path, os.WriteFile(path, kc, 0o600)
}
