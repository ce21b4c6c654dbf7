package externalgrpc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials"
)

// Certs are PEM files for mTLS between the autoscaler and the service on
// 127.0.0.1: a CA, the service's and the client's certificates signed by
// it, and a client certificate signed by another CA (WrongCert,
// WrongKey), which the service must refuse.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, WrongCert, WrongKey string
}

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newAuthority(name string) (*authority, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key}, der, err
}

func (a *authority) issue(name string, serial int64, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// NewCerts writes the files into dir.
func NewCerts(dir string) (*Certs, error) {
	ca, caDER, err := newAuthority("draxr-test-ca")
	if err != nil {
		return nil, err
	}
	other, _, err := newAuthority("some-other-ca")
	if err != nil {
		return nil, err
	}
	c := &Certs{}
	files := map[*string][]byte{&c.CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	for _, f := range []struct {
		by        *authority
		name      string
		server    bool
		cert, key *string
		serial    int64
		certFile  string
		keyFile   string
	}{
		{ca, "127.0.0.1", true, &c.ServerCert, &c.ServerKey, 2, "server.pem", "server-key.pem"},
		{ca, "draxr-autoscaler", false, &c.ClientCert, &c.ClientKey, 3, "client.pem", "client-key.pem"},
		{other, "draxr-autoscaler", false, &c.WrongCert, &c.WrongKey, 4, "wrong.pem", "wrong-key.pem"},
	} {
		cert, key, err := f.by.issue(f.name, f.serial, f.server)
		if err != nil {
			return nil, err
		}
		*f.cert, *f.key = filepath.Join(dir, f.certFile), filepath.Join(dir, f.keyFile)
		files[f.cert], files[f.key] = cert, key
	}
	c.CA = filepath.Join(dir, "ca.pem")
	for path, data := range files {
		if err := os.WriteFile(*path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ServerCreds are the service's: its certificate, and client
// certificates required and verified against the CA.
func (c *Certs) ServerCreds() (credentials.TransportCredentials, error) {
	pair, err := tls.LoadX509KeyPair(c.ServerCert, c.ServerKey)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}), nil
}
