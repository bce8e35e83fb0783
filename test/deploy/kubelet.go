// Package deploy proves that paywarden's shipped manifests run the programs
// they describe, on a real API server and without a kubelet: what `make
// deploy` (config/default) or the Helm chart renders is applied server-side,
// then each Deployment's container is started as a local process the way a
// kubelet would start it — its command, arguments and environment taken from
// the applied Deployment, its ports, probes and Services resolved to loopback
// ports, and its API credentials a token of the pod's ServiceAccount minted
// with the TokenRequest API.
//
// What a kubelet does that this does not: a network namespace per pod (each
// port the container binds is moved to a free loopback port instead, and
// probes and Services follow the move), the image's filesystem and user, and
// the in-cluster config files (the token goes into a kubeconfig named by
// $KUBECONFIG instead of /var/run/secrets).
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/internal/localnet"
)

// Kubelet starts Deployments' pods as local processes.
type Kubelet struct {
	// Config is an admin identity of the API server: its address and CA go
	// into each pod's kubeconfig; its credentials do not.
	Config *rest.Config
	// Client is an admin client: it mints ServiceAccount tokens and reads
	// the Secrets and ConfigMaps an environment refers to.
	Client client.Client
	// Binaries maps an image path (a container's command) to a local binary.
	Binaries map[string]string
	// Entrypoint is the image's entrypoint, run when a container sets no command.
	Entrypoint string
	// Dir holds each pod's kubeconfig, working directory and log.
	Dir string
}

// Pod is one running replica of a Deployment.
type Pod struct {
	Name       string
	Deployment *appsv1.Deployment
	Container  corev1.Container
	// Args and Env are what the process was started with.
	Args []string
	Env  []string
	// Ports maps each port the container declares or binds to the
	// loopback port it really listens on.
	Ports map[int32]int
	// Log is the file holding the process's stdout and stderr.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Run starts one replica of d.
func (k *Kubelet) Run(ctx context.Context, d *appsv1.Deployment) (*Pod, error) {
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		return nil, fmt.Errorf("deployment %s: %d containers and %d init containers; this kubelet runs pods of one container",
			d.Name, len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	p := &Pod{Name: d.Name + "-0", Deployment: d, Container: c, Ports: map[int32]int{}, done: make(chan struct{})}
	dir := filepath.Join(k.Dir, p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}

	kubeconfig, err := k.serviceAccountKubeconfig(ctx, d, dir)
	if err != nil {
		return nil, err
	}
	env, err := k.environment(ctx, d, c)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", d.Name, err)
	}
	bin, args, err := k.commandLine(c, env)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", d.Name, err)
	}
	for _, port := range c.Ports {
		if err := p.mapPort(port.ContainerPort); err != nil {
			return nil, err
		}
	}
	// What the container binds on its own network namespace is moved to a
	// free loopback port: the manager and the receiver both bind :8080.
	for i, a := range args {
		if args[i], err = p.rebind(a); err != nil {
			return nil, err
		}
	}
	p.Args = args
	for _, kv := range env {
		p.Env = append(p.Env, kv.Name+"="+kv.Value)
	}
	// Nothing of the test's own environment leaks into the pod.
	p.Env = append(p.Env, "KUBECONFIG="+kubeconfig)

	p.Log = filepath.Join(dir, "log")
	f, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = p.Env, dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("deployment %s: start %s: %w", d.Name, bin, err)
	}
	p.cmd = cmd
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// serviceAccountKubeconfig mints a token of the pod's ServiceAccount with
// the TokenRequest API and writes a kubeconfig that uses only that token.
func (k *Kubelet) serviceAccountKubeconfig(ctx context.Context, d *appsv1.Deployment, dir string) (string, error) {
	spec := d.Spec.Template.Spec
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		return "", fmt.Errorf("deployment %s does not mount its ServiceAccount token: the program has no in-cluster credentials", d.Name)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: spec.ServiceAccountName}}
	if sa.Name == "" {
		sa.Name = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := k.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("deployment %s: token of ServiceAccount %s/%s: %w", d.Name, sa.Namespace, sa.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: k.Config.Host, CertificateAuthorityData: k.Config.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "sa", Namespace: d.Namespace}
	cfg.CurrentContext = "sa"
	file := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return "", err
	}
	return file, nil
}

// environment resolves the container's env the way the kubelet does for
// the sources paywarden's manifests use: literal values, the downward API
// (fieldRef, resourceFieldRef), and keys of Secrets and ConfigMaps.
func (k *Kubelet) environment(ctx context.Context, d *appsv1.Deployment, c corev1.Container) ([]corev1.EnvVar, error) {
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("envFrom is not emulated")
	}
	var out []corev1.EnvVar
	for _, e := range c.Env {
		v, err := k.envValue(ctx, d, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: expand(v, out)})
	}
	return out, nil
}

func (k *Kubelet) envValue(ctx context.Context, d *appsv1.Deployment, e corev1.EnvVar) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return e.Value, nil
	case src.FieldRef != nil:
		return fieldValue(d, src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		return resourceValue(d, src.ResourceFieldRef)
	case src.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: src.SecretKeyRef.Name}, s); err != nil {
			return "", err
		}
		v, ok := s.Data[src.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", src.SecretKeyRef.Name, src.SecretKeyRef.Key)
		}
		return string(v), nil
	case src.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: src.ConfigMapKeyRef.Name}, cm); err != nil {
			return "", err
		}
		v, ok := cm.Data[src.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("configmap %s has no key %s", src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", errors.New("valueFrom source not emulated")
}

var labelPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// fieldValue is a downward-API field of the pod d's template makes.
func fieldValue(d *appsv1.Deployment, field string) (string, error) {
	switch field {
	case "metadata.namespace":
		return d.Namespace, nil
	case "metadata.name":
		return d.Name + "-0", nil
	case "spec.serviceAccountName":
		return d.Spec.Template.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return "localhost", nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	}
	if m := labelPath.FindStringSubmatch(field); m != nil {
		if m[1] == "labels" {
			return d.Spec.Template.Labels[m[2]], nil
		}
		return d.Spec.Template.Annotations[m[2]], nil
	}
	return "", fmt.Errorf("fieldRef %s is not emulated", field)
}

// resourceValue is a container's request or limit in units of the divisor,
// rounded up, as the downward API gives it.
func resourceValue(d *appsv1.Deployment, ref *corev1.ResourceFieldSelector) (string, error) {
	var c *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if x := &d.Spec.Template.Spec.Containers[i]; x.Name == ref.ContainerName || ref.ContainerName == "" {
			c = x
			break
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef names container %q, which the pod does not have", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %s is not emulated", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		// The kubelet would give the node's allocatable: a limit that is not
		// set is the node's size, which this machine is not.
		return "", fmt.Errorf("resourceFieldRef %s: container %s sets no %s", ref.Resource, c.Name, ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	n, dn := q.MilliValue(), div.MilliValue()
	return strconv.FormatInt((n+dn-1)/dn, 10), nil
}

var envRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(NAME) with the value of an earlier variable, as the
// kubelet does in env values, command and args; unknown references stay.
func expand(s string, env []corev1.EnvVar) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		if ref == "$$" {
			return "$"
		}
		name := ref[2 : len(ref)-1]
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value
			}
		}
		return ref
	})
}

// commandLine is the binary and arguments the container runs: its command
// (else the image's entrypoint) and args, with $(VAR) references expanded.
func (k *Kubelet) commandLine(c corev1.Container, env []corev1.EnvVar) (string, []string, error) {
	command := c.Command
	if len(command) == 0 {
		command = []string{k.Entrypoint}
	}
	bin, ok := k.Binaries[command[0]]
	if !ok {
		return "", nil, fmt.Errorf("container %s runs %s, which the image does not have (it has %v)", c.Name, command[0], keys(k.Binaries))
	}
	var args []string
	for _, a := range append(append([]string{}, command[1:]...), c.Args...) {
		args = append(args, expand(a, env))
	}
	return bin, args, nil
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// mapPort gives container port n a free loopback port.
func (p *Pod) mapPort(n int32) error {
	if _, ok := p.Ports[n]; ok || n == 0 {
		return nil
	}
	free, err := localnet.FreePorts(1)
	if err != nil {
		return err
	}
	p.Ports[n] = free[0]
	return nil
}

// bindAddress is an argument that binds a listener: "--flag=host:port",
// "host:port" or ":port".
var bindAddress = regexp.MustCompile(`^(-{1,2}[\w-]+=)?([\w.-]*|\[[0-9a-fA-F:]*\]):(\d+)$`)

// rebind moves a listen address in an argument to the loopback port its
// container port maps to.
func (p *Pod) rebind(arg string) (string, error) {
	m := bindAddress.FindStringSubmatch(arg)
	if m == nil {
		return arg, nil
	}
	n, err := strconv.ParseInt(m[3], 10, 32)
	if err != nil || n == 0 {
		return arg, nil
	}
	if err := p.mapPort(int32(n)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s127.0.0.1:%d", m[1], p.Ports[int32(n)]), nil
}

// Port resolves a port of the container, by name or number, to the
// loopback port it listens on.
func (p *Pod) Port(port intstr.IntOrString) (int, error) {
	n := int32(port.IntValue())
	if port.Type == intstr.String {
		n = 0
		for _, cp := range p.Container.Ports {
			if cp.Name == port.StrVal {
				n = cp.ContainerPort
			}
		}
		if n == 0 {
			return 0, fmt.Errorf("container %s has no port named %q", p.Container.Name, port.StrVal)
		}
	}
	local, ok := p.Ports[n]
	if !ok {
		return 0, fmt.Errorf("container %s neither declares nor binds port %d", p.Container.Name, n)
	}
	return local, nil
}

// Probe runs an HTTP probe once: nil when it answers 2xx or 3xx.
func (p *Pod) Probe(ctx context.Context, pr *corev1.Probe) error {
	if pr == nil || pr.HTTPGet == nil {
		return errors.New("not an httpGet probe")
	}
	g := pr.HTTPGet
	port, err := p.Port(g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = "127.0.0.1"
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	url := fmt.Sprintf("%s://%s:%d%s", scheme, host, port, g.Path)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(pr.TimeoutSeconds, 1))*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// WaitReady polls the readiness probe until it succeeds, then checks the
// liveness probe once; it fails early when the process exits.
func (p *Pod) WaitReady(ctx context.Context, timeout time.Duration) error {
	c := p.Container
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		return fmt.Errorf("%s: container %s lacks a readiness or liveness probe", p.Name, c.Name)
	}
	err := localnet.Poll(ctx, timeout, func(ctx context.Context) error {
		select {
		case <-p.done:
			return localnet.Final(fmt.Errorf("process exited: %v", p.err))
		default:
		}
		return p.Probe(ctx, c.ReadinessProbe)
	})
	if err == nil {
		err = p.Probe(ctx, c.LivenessProbe)
	}
	if err != nil {
		return fmt.Errorf("%s not ready: %w", p.Name, err)
	}
	return nil
}

// Running reports whether the process is alive.
func (p *Pod) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, waits for the pod's grace period, then kills.
func (p *Pod) Stop() {
	if p.cmd == nil {
		return
	}
	grace := 30 * time.Second
	if g := p.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Tail is the last n lines of the log, each cut to 300 bytes.
func (p *Pod) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = l[:300] + " ..."
		}
	}
	return fmt.Sprintf("--- %s, last lines of %s:\n%s", p.Name, p.Log, strings.Join(lines, "\n"))
}

// LogLines are the lines of the log that contain s, case-insensitively.
func (p *Pod) LogLines(s string) []string {
	b, _ := os.ReadFile(p.Log)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
			out = append(out, line)
		}
	}
	return out
}

// Selects reports whether svc routes to the pod.
func (p *Pod) Selects(svc *corev1.Service) bool {
	return svc.Namespace == p.Deployment.Namespace && len(svc.Spec.Selector) > 0 &&
		labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Deployment.Spec.Template.Labels))
}

// ServiceURL is where a client of svc's port portName reaches this pod:
// the Service must select the pod and its targetPort must be one the
// container listens on.
func (p *Pod) ServiceURL(svc *corev1.Service, portName string) (string, error) {
	if !p.Selects(svc) {
		return "", fmt.Errorf("service %s/%s does not select the pods of %s", svc.Namespace, svc.Name, p.Deployment.Name)
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Name != portName {
			continue
		}
		target := sp.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(sp.Port)
		}
		local, err := p.Port(target)
		if err != nil {
			return "", fmt.Errorf("service %s port %s: %w", svc.Name, portName, err)
		}
		return fmt.Sprintf("http://127.0.0.1:%d", local), nil
	}
	return "", fmt.Errorf("service %s has no port named %q", svc.Name, portName)
}
