// Command helmgen writes the Helm chart charts/paywarden from config/: the
// objects of config/default (and the alerts of config/prometheus), rendered
// as kustomize renders them, become the chart's templates with the image,
// replicas, resources, namespaces and the metrics, alerts and CRD toggles
// made values. config/ stays the one source: `make manifests` regenerates
// the chart and `make verify` fails when the committed chart is stale.
// With default values and release namespace paywarden-system the chart
// renders what `make deploy` applies (test/helm holds it to that).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// systemNamespace is the namespace config/ puts paywarden in; in the chart
// it is the release's.
const systemNamespace = "paywarden-system"

// bundleScoped are the namespaced RBAC objects that grant access to the
// webhook bundles and the ledger: they live where the bundles are kept
// (values.bundleNamespace), not where the pods run. Every other namespaced
// object goes into the release namespace.
var bundleScoped = map[string]bool{
	"Role/paywarden-manager": true, "RoleBinding/paywarden-manager": true,
	"Role/paywarden-receiver-bundles": true, "RoleBinding/paywarden-receiver-bundles": true,
}

// releaseScoped are the namespaced RBAC objects that stay with the pods.
var releaseScoped = map[string]bool{
	"Role/paywarden-leader-election": true, "RoleBinding/paywarden-leader-election": true,
}

func main() {
	out := flag.String("out", "charts/paywarden", "chart directory to write (replaced)")
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "helmgen:", err)
		os.Exit(1)
	}
}

func run(root, out string) error {
	files, err := chart(root)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for name, content := range files {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func render(root, dir string) (resmap.ResMap, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return m, nil
}

// generator collects the placeholders it puts into objects and what each
// becomes in the template text.
type generator struct {
	inline map[string]string              // token -> template expression
	lines  map[string]func(string) string // token -> block, given the line's indentation
	n      int
	values values
}

// values are the defaults values.yaml records, read from config/.
type values struct {
	repository, tag string
	replicas        map[string]string
	resources       map[string]string
}

func (g *generator) token() string {
	g.n++
	// Fixed width: no token is a prefix of another.
	return fmt.Sprintf("helmgen-placeholder-%06d", g.n)
}

// expr is a scalar placeholder replaced by a template expression.
func (g *generator) expr(e string) *yaml.RNode {
	t := g.token()
	g.inline[t] = e
	return yaml.NewScalarRNode(t)
}

// block is a scalar placeholder whose whole line is replaced by f(indent).
func (g *generator) block(f func(indent string) string) string {
	t := g.token()
	g.lines[t] = f
	return t
}

func chart(root string) (map[string]string, error) {
	g := &generator{inline: map[string]string{}, lines: map[string]func(string) string{},
		values: values{replicas: map[string]string{}, resources: map[string]string{}}}
	def, err := render(root, "config/default")
	if err != nil {
		return nil, err
	}
	alerts, err := render(root, "config/prometheus")
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, r := range def.Resources() {
		rn := &r.RNode
		kind, name := rn.GetKind(), rn.GetName()
		var cond string
		switch kind {
		case "Namespace":
			// Helm installs into a namespace that exists (--create-namespace).
			continue
		case "CustomResourceDefinition":
			cond = ".Values.crds.enabled"
			if err := g.keepCRD(rn); err != nil {
				return nil, err
			}
		case "Deployment":
			if err := g.deployment(rn); err != nil {
				return nil, err
			}
		case "Service":
			if metricsOnly(rn) {
				cond = ".Values.metrics.enabled"
			}
		}
		if err := g.namespaces(rn, kind, name); err != nil {
			return nil, err
		}
		text, err := g.template(rn, cond)
		if err != nil {
			return nil, err
		}
		files[templateFile(kind, name)] = text
	}
	for _, r := range alerts.Resources() {
		rn := &r.RNode
		if err := g.namespaces(rn, rn.GetKind(), rn.GetName()); err != nil {
			return nil, err
		}
		text, err := g.template(rn, ".Values.alerts.enabled")
		if err != nil {
			return nil, err
		}
		files[templateFile(rn.GetKind(), rn.GetName())] = text
	}
	files["Chart.yaml"] = chartYAML
	files["templates/_helpers.tpl"] = helpers
	files["values.yaml"] = g.values.yaml()
	return files, nil
}

func templateFile(kind, name string) string {
	if kind == "CustomResourceDefinition" {
		return "templates/crds/" + name + ".yaml"
	}
	return "templates/" + strings.ToLower(kind) + "-" + name + ".yaml"
}

// namespaces moves namespaced objects and ServiceAccount subjects from
// paywarden-system to the release namespace, or to the bundle namespace.
func (g *generator) namespaces(rn *yaml.RNode, kind, name string) error {
	key := kind + "/" + name
	if ns := rn.GetNamespace(); ns != "" {
		if ns != systemNamespace {
			return fmt.Errorf("%s is in namespace %s, not %s", key, ns, systemNamespace)
		}
		target := `{{ .Release.Namespace }}`
		switch {
		case bundleScoped[key]:
			target = `{{ include "paywarden.bundleNamespace" . }}`
		case releaseScoped[key]:
		case kind == "Role" || kind == "RoleBinding":
			return fmt.Errorf("%s: decide whether it belongs to the bundle namespace or the release namespace (hack/helmgen)", key)
		}
		if err := rn.PipeE(yaml.Lookup("metadata"), yaml.SetField("namespace", g.expr(target))); err != nil {
			return err
		}
	}
	subjects, err := rn.Pipe(yaml.Lookup("subjects"))
	if err != nil || subjects == nil {
		return err
	}
	elems, err := subjects.Elements()
	if err != nil {
		return err
	}
	for _, s := range elems {
		if yaml.GetValue(s.Field("namespace").Value) == systemNamespace {
			if err := s.PipeE(yaml.SetField("namespace", g.expr(`{{ .Release.Namespace }}`))); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepCRD adds helm.sh/resource-policy: keep unless crds.keep is false:
// uninstalling the chart must not delete every Payment.
func (g *generator) keepCRD(rn *yaml.RNode) error {
	t := g.block(func(indent string) string {
		return "{{- if .Values.crds.keep }}\n" + indent + "helm.sh/resource-policy: keep\n{{- end }}"
	})
	return rn.PipeE(yaml.SetAnnotation("helmgen-keep", t))
}

var metricsArg = regexp.MustCompile(`^--metrics-bind-address=(.+)$`)

// deployment makes the replicas, the image, the resources, the metrics
// listener and the bundle namespace values.
func (g *generator) deployment(rn *yaml.RNode) error {
	component := rn.GetLabels()["app.kubernetes.io/component"]
	if component == "" {
		return fmt.Errorf("deployment %s has no app.kubernetes.io/component label", rn.GetName())
	}
	v := ".Values." + component
	replicas, err := rn.Pipe(yaml.Lookup("spec", "replicas"))
	if err != nil || replicas == nil {
		return fmt.Errorf("deployment %s: no spec.replicas (%v)", rn.GetName(), err)
	}
	g.values.replicas[component] = yaml.GetValue(replicas)
	if err := rn.PipeE(yaml.Lookup("spec"), yaml.SetField("replicas", g.expr("{{ "+v+".replicas }}"))); err != nil {
		return err
	}
	containers, err := rn.Pipe(yaml.Lookup("spec", "template", "spec", "containers"))
	if err != nil {
		return err
	}
	elems, err := containers.Elements()
	if err != nil || len(elems) != 1 {
		return fmt.Errorf("deployment %s: want one container (%v)", rn.GetName(), err)
	}
	c := elems[0]

	image := yaml.GetValue(c.Field("image").Value)
	repo, tag, ok := strings.Cut(image, ":")
	if !ok {
		return fmt.Errorf("deployment %s: image %q has no tag", rn.GetName(), image)
	}
	if g.values.repository != "" && (g.values.repository != repo || g.values.tag != tag) {
		return fmt.Errorf("deployment %s runs %s, another %s:%s: the chart has one image", rn.GetName(), image, g.values.repository, g.values.tag)
	}
	g.values.repository, g.values.tag = repo, tag
	if err := c.PipeE(yaml.SetField("image", g.expr(`"{{ .Values.image.repository }}:{{ .Values.image.tag }}"`))); err != nil {
		return err
	}
	pull := g.block(func(indent string) string {
		return "{{- with .Values.image.pullPolicy }}\n" + indent + "imagePullPolicy: {{ . }}\n{{- end }}"
	})
	if err := c.PipeE(yaml.SetField("helmgen-pull-policy", yaml.NewScalarRNode(pull))); err != nil {
		return err
	}

	res := c.Field("resources")
	if res == nil {
		return fmt.Errorf("deployment %s sets no resources", rn.GetName())
	}
	s, err := res.Value.String()
	if err != nil {
		return err
	}
	g.values.resources[component] = s
	resources := g.block(func(indent string) string {
		return indent + "resources:\n" + indent + "  {{- toYaml " + v + ".resources | nindent " + fmt.Sprint(len(indent)+2) + " }}"
	})
	if err := c.PipeE(yaml.SetField("resources", yaml.NewScalarRNode(resources))); err != nil {
		return err
	}

	args, err := c.Pipe(yaml.Lookup("args"))
	if err != nil || args == nil {
		return fmt.Errorf("deployment %s: no args (%v)", rn.GetName(), err)
	}
	items, err := args.Elements()
	if err != nil {
		return err
	}
	for _, a := range items {
		if m := metricsArg.FindStringSubmatch(yaml.GetValue(a)); m != nil {
			a.SetYNode(g.expr(`--metrics-bind-address={{ if .Values.metrics.enabled }}` + m[1] + `{{ else }}0{{ end }}`).YNode())
		}
	}
	bundle := g.block(func(indent string) string {
		return "{{- with .Values.bundleNamespace }}\n" + indent + "- --bundle-namespace={{ . }}\n{{- end }}"
	})
	return args.PipeE(yaml.Append(yaml.NewScalarRNode(bundle).YNode()))
}

// metricsOnly: a Service whose every port is named metrics.
func metricsOnly(rn *yaml.RNode) bool {
	ports, err := rn.Pipe(yaml.Lookup("spec", "ports"))
	if err != nil || ports == nil {
		return false
	}
	elems, _ := ports.Elements()
	for _, p := range elems {
		if yaml.GetValue(p.Field("name").Value) != "metrics" {
			return false
		}
	}
	return len(elems) > 0
}

var braces = regexp.MustCompile(`\{\{|\}\}`)

// template is the object's YAML with text that looks like a template
// escaped (the alerts' {{ $value }} must reach Prometheus as written), the
// placeholders replaced, and the whole wrapped in {{ if cond }}.
func (g *generator) template(rn *yaml.RNode, cond string) (string, error) {
	s, err := rn.String()
	if err != nil {
		return "", err
	}
	s = braces.ReplaceAllStringFunc(s, func(b string) string { return `{{ "` + b + `" }}` })
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		replaced := false
		for t, f := range g.lines {
			if strings.Contains(line, t) {
				indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
				out.WriteString(f(indent) + "\n")
				replaced = true
				break
			}
		}
		if !replaced {
			out.WriteString(line)
		}
	}
	text := out.String()
	for t, e := range g.inline {
		text = strings.ReplaceAll(text, t, e)
	}
	if strings.Contains(text, "helmgen-placeholder-") {
		return "", fmt.Errorf("%s %s: a placeholder is left in\n%s", rn.GetKind(), rn.GetName(), text)
	}
	header := "# Generated by hack/helmgen from config/; do not edit.\n"
	if cond != "" {
		return header + "{{- if " + cond + " }}\n" + text + "{{- end }}\n", nil
	}
	return header + text, nil
}

const chartYAML = `# Generated by hack/helmgen from config/; do not edit.
apiVersion: v2
name: paywarden
description: Payments as Kubernetes objects — the paywarden operator, its webhook receiver and CRDs.
type: application
version: 0.1.0
appVersion: "0.1.0"
home: https://github.com/paywarden/paywarden
sources:
- https://github.com/paywarden/paywarden
`

const helpers = `{{/* Generated by hack/helmgen from config/; do not edit. */}}
{{/*
Where the manager keeps the receiver's webhook verification bundles and the
ledger: values.bundleNamespace, else the release namespace.
*/}}
{{- define "paywarden.bundleNamespace" -}}
{{- .Values.bundleNamespace | default .Release.Namespace -}}
{{- end -}}
`

func (v values) yaml() string {
	var b strings.Builder
	b.WriteString(`# Generated by hack/helmgen from config/; do not edit (the defaults are config/'s).
# Install into paywarden's own namespace:
#   helm install paywarden charts/paywarden -n paywarden-system --create-namespace
# and label it for the restricted Pod Security Standard, as config/ does:
#   kubectl label ns paywarden-system pod-security.kubernetes.io/enforce=restricted

image:
  # The image ` + "`make image`" + ` builds (crane push bin/image/oci <repository>:<tag>).
  repository: ` + v.repository + `
  tag: ` + v.tag + `
  # Empty: the cluster's default (Always for :latest, else IfNotPresent).
  pullPolicy: ""

# Where the manager keeps the receiver's webhook verification bundles and
# its ledger (Secrets and ConfigMaps; the namespace must exist). Empty: the
# release namespace.
bundleNamespace: ""

# Prometheus metrics: the manager's and the receiver's metrics listeners and
# their Services. Disabled, neither process serves /metrics.
metrics:
  enabled: true

# The PrometheusRule of config/prometheus (needs the Prometheus Operator's CRDs).
alerts:
  enabled: false

crds:
  # Install and upgrade the CRDs with the chart.
  enabled: true
  # Keep them when the release is uninstalled: deleting a CRD deletes every
  # Payment, Refund and WebhookEvent.
  keep: true
`)
	for _, c := range []string{"manager", "receiver"} {
		fmt.Fprintf(&b, "\n%s:\n  replicas: %s\n  resources:\n", c, v.replicas[c])
		for _, line := range strings.Split(strings.TrimRight(v.resources[c], "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}
