package certs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files names the files of a cert dir.
type Files struct {
	// Dir is the cert dir.
	Dir string
	// CertName is the serving certificate's file. Defaults to "tls.crt".
	CertName string
	// KeyName is the serving key's file. Defaults to "tls.key".
	KeyName string
	// CAName is the CA certificate's file. Defaults to "ca.crt".
	CAName string
}

func (f Files) withDefaults() Files {
	if f.CertName == "" {
		f.CertName = "tls.crt"
	}
	if f.KeyName == "" {
		f.KeyName = "tls.key"
	}
	if f.CAName == "" {
		f.CAName = "ca.crt"
	}
	return f
}

// Write writes the serving pair and the CA certificate into the cert dir,
// creating it if needed. Each file is written to a temporary file and renamed
// into place, and only when its content changes, so that a certwatcher
// reloads once and never reads half a file.
func (f Files) Write(serving KeyPair, caCert []byte) error {
	f = f.withDefaults()
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return fmt.Errorf("creating the cert dir: %w", err)
	}
	// The key first: the watcher reloads on the certificate's change, and
	// must then find the matching key.
	for _, file := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{f.KeyName, serving.Key, 0o600},
		{f.CAName, caCert, 0o644},
		{f.CertName, serving.Cert, 0o644},
	} {
		if err := writeIfChanged(filepath.Join(f.Dir, file.name), file.data, file.mode); err != nil {
			return err
		}
	}
	return nil
}

// Read reads the serving pair and the CA certificate (nil when the file is
// absent) from the cert dir.
func (f Files) Read() (KeyPair, []byte, error) {
	f = f.withDefaults()
	cert, err := os.ReadFile(filepath.Join(f.Dir, f.CertName))
	if err != nil {
		return KeyPair{}, nil, err
	}
	key, err := os.ReadFile(filepath.Join(f.Dir, f.KeyName))
	if err != nil {
		return KeyPair{}, nil, err
	}
	ca, err := os.ReadFile(filepath.Join(f.Dir, f.CAName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return KeyPair{}, nil, err
	}
	return KeyPair{Cert: cert, Key: key}, ca, nil
}

// EnsureFiles makes sure the cert dir holds a serving certificate and key. It
// does nothing when both files exist; otherwise it makes a CA and a
// certificate it signs for hosts, writes them (the CA as ca.crt) and reports
// true.
func EnsureFiles(f Files, hosts []string) (bool, error) {
	f = f.withDefaults()
	_, errCert := os.Stat(filepath.Join(f.Dir, f.CertName))
	_, errKey := os.Stat(filepath.Join(f.Dir, f.KeyName))
	if errCert == nil && errKey == nil {
		return false, nil
	}
	ca, err := NewCA("polyop-webhook-ca", CAValidity)
	if err != nil {
		return false, err
	}
	serving, err := NewServingCert(ca, hosts, ServingValidity)
	if err != nil {
		return false, err
	}
	if err := f.Write(serving, ca.Cert); err != nil {
		return false, err
	}
	return true, nil
}

func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
