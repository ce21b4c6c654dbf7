package externalgrpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// DefaultTimeout is CA's timeout of one call when grpc_timeout is unset.
const DefaultTimeout = 5 * time.Second

// Config is the --cloud-config file of the externalgrpc provider: CA's
// fields under CA's names, and draxr's template ConfigMap, which CA
// ignores (it reads the file leniently), so one file serves both.
type Config struct {
	// Address is the service's host:port.
	Address string `json:"address"`
	// Key, Cert and Cacert are PEM files: the client's key and certificate
	// and the CA that signed the service's certificate. Without Cert the
	// connection is plaintext, as in CA.
	Key    string `json:"key,omitempty"`
	Cert   string `json:"cert,omitempty"`
	Cacert string `json:"cacert,omitempty"`
	// GRPCTimeout bounds each call (DefaultTimeout when unset).
	GRPCTimeout *metav1.Duration `json:"grpc_timeout,omitempty"`
	// TemplateSlicesConfigMap is draxr's: "namespace/name" of a ConfigMap
	// mapping node group ids to template ResourceSlices (see
	// TemplateConfig).
	TemplateSlicesConfigMap string `json:"template_slices_config_map,omitempty"`
}

// ReadConfig reads and checks a cloud-config file; errors name the file
// and the field.
func ReadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, errors.New("externalgrpc provider: --cloud-config is required (a YAML file with the service's address)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("externalgrpc provider: --cloud-config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("externalgrpc provider: --cloud-config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads a cloud-config document strictly: a misspelt field
// is an error rather than a silently insecure or unconfigured client.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("not an externalgrpc cloud-config: %s", yamlError(err))
	}
	if c.Address == "" {
		return nil, errors.New("address is required (host:port of the provider service)")
	}
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return nil, fmt.Errorf("address %q: %w", c.Address, err)
	}
	if c.Cert != "" && (c.Key == "" || c.Cacert == "") {
		return nil, errors.New("cert is set: key and cacert are required too (mTLS)")
	}
	if c.Cert == "" && (c.Key != "" || c.Cacert != "") {
		return nil, errors.New("key or cacert is set without cert: mTLS needs all three")
	}
	if c.GRPCTimeout != nil && c.GRPCTimeout.Duration <= 0 {
		return nil, fmt.Errorf("grpc_timeout must be positive, got %s", c.GRPCTimeout.Duration)
	}
	if c.TemplateSlicesConfigMap != "" {
		ns, name, ok := strings.Cut(c.TemplateSlicesConfigMap, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("template_slices_config_map %q: want namespace/name", c.TemplateSlicesConfigMap)
		}
	}
	return &c, nil
}

// Timeout is the per-call timeout.
func (c *Config) Timeout() time.Duration {
	if c.GRPCTimeout == nil {
		return DefaultTimeout
	}
	return c.GRPCTimeout.Duration
}

// Dial opens the connection: mTLS when cert is set (the service's
// certificate must be for the address's host and signed by cacert),
// plaintext otherwise. The connection is made lazily; a refused
// handshake shows on the first call.
func (c *Config) Dial() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if c.Cert != "" {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(c.Address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("externalgrpc provider: %s: %w", c.Address, err)
	}
	return conn, nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("externalgrpc provider: cert %s and key %s: %w", c.Cert, c.Key, err)
	}
	pem, err := os.ReadFile(c.Cacert)
	if err != nil {
		return nil, fmt.Errorf("externalgrpc provider: cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("externalgrpc provider: cacert %s holds no PEM certificate", c.Cacert)
	}
	host, _, _ := net.SplitHostPort(c.Address)
	certFile := c.Cert
	return &tls.Config{ServerName: host, RootCAs: pool, MinVersion: tls.VersionTLS12,
		// Refuse in the handshake, with the reason, a certificate the
		// service will not accept: under TLS 1.3 the service's own refusal
		// arrives after the handshake and may surface as a bare broken
		// pipe instead.
		GetClientCertificate: func(req *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if err := req.SupportsCertificate(&pair); err != nil {
				return nil, fmt.Errorf("client certificate %s is not one the service accepts: %w", certFile, err)
			}
			return &pair, nil
		}}, nil
}
