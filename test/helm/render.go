// Command render renders a Helm 3 chart the way `helm template` does, offline: Go text/template
// with the sprig functions and Helm's own (include, tpl, required, toYaml, fromYaml, toJson,
// fromJson, lookup returning nothing, fail), and the .Values, .Release, .Chart, .Capabilities,
// .Files and .Template objects. It prints {"manifests":[{"template","object"}],"notes"} as JSON;
// a template error (fail, required) goes to stderr with exit status 1.
//
// Built in GOPATH mode from Debian's packages (test/helm/install-deps.sh).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type chartMeta struct {
	APIVersion  string `json:"apiVersion"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	Description string `json:"description"`
	Type        string `json:"type"`
	KubeVersion string `json:"kubeVersion"`
}

// Chart mirrors the field names Helm exposes as .Chart.
type Chart struct {
	APIVersion, Name, Version, AppVersion, Description, Type, KubeVersion string
}

type Release struct {
	Name, Namespace, Service string
	IsInstall, IsUpgrade     bool
	Revision                 int
}

type VersionSet []string

// Has is .Capabilities.APIVersions.Has: a "group/version" or "group/version/Kind".
func (v VersionSet) Has(s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

type KubeVersion struct{ Version, Major, Minor, GitVersion string }

func (k KubeVersion) String() string { return k.Version }

type Capabilities struct {
	APIVersions VersionSet
	KubeVersion KubeVersion
	HelmVersion map[string]string
}

// Files is .Files: the chart's files outside templates/.
type Files struct{ root string }

func (f Files) Get(name string) string     { return string(f.GetBytes(name)) }
func (f Files) GetBytes(name string) []byte {
	b, err := os.ReadFile(filepath.Join(f.root, filepath.FromSlash(name)))
	if err != nil {
		return nil
	}
	return b
}

type TemplateInfo struct{ Name, BasePath string }

// The API versions a cluster of Helm's default capabilities has.
var builtinAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1",
	"admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "autoscaling/v2", "storage.k8s.io/v1",
	"coordination.k8s.io/v1", "scheduling.k8s.io/v1", "certificates.k8s.io/v1", "discovery.k8s.io/v1",
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	chartDir := flag.String("chart", "", "chart directory")
	name := flag.String("name", "release", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kube := flag.String("kube-version", "v1.30.0", "Kubernetes version")
	upgrade := flag.Bool("upgrade", false, "render as an upgrade")
	var valueFiles, apiVersions stringList
	flag.Var(&valueFiles, "values", "values file (YAML or JSON), repeatable")
	flag.Var(&apiVersions, "api-versions", "extra API version, repeatable")
	flag.Parse()
	out, err := render(*chartDir, *name, *namespace, *kube, *upgrade, valueFiles, apiVersions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

func readYAML(file string) (map[string]interface{}, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}

// coalesce merges src over dst as Helm merges user values over the chart's: maps merge, a null deletes.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

func toYAML(v interface{}) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

var separator = regexp.MustCompile(`(?m)^---\s*$`)
var executionError = regexp.MustCompile(`^template: (.*?): executing .*? at <.*?>: error calling \w+: `)

type manifest struct {
	Template string          `json:"template"`
	Object   json.RawMessage `json:"object"`
}

func render(chartDir, name, namespace, kube string, upgrade bool, valueFiles, apiVersions []string) ([]byte, error) {
	var meta chartMeta
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if meta.APIVersion != "v2" {
		return nil, errors.New("Chart.yaml: apiVersion must be v2 (Helm 3)")
	}
	values, err := readYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range valueFiles {
		user, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		values = coalesce(values, user)
	}
	kv := strings.Split(strings.TrimPrefix(kube, "v"), ".")
	if len(kv) < 2 {
		return nil, fmt.Errorf("kube-version %q is not vMAJOR.MINOR.PATCH", kube)
	}
	top := map[string]interface{}{
		"Values": values,
		"Chart": Chart{meta.APIVersion, meta.Name, meta.Version, meta.AppVersion, meta.Description, meta.Type,
			meta.KubeVersion},
		"Release": Release{Name: name, Namespace: namespace, Service: "Helm", IsInstall: !upgrade, IsUpgrade: upgrade,
			Revision: 1},
		"Capabilities": Capabilities{
			APIVersions: append(append(VersionSet{}, builtinAPIVersions...), apiVersions...),
			KubeVersion: KubeVersion{Version: kube, Major: kv[0], Minor: kv[1], GitVersion: kube},
			HelmVersion: map[string]string{"Version": "v3.16.0"},
		},
		"Files": Files{root: chartDir},
	}

	root := template.New("root")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return strings.ReplaceAll(buf.String(), "<no value>", ""), err
	}
	root.Funcs(funcs).Option("missingkey=zero")

	templatesDir := filepath.Join(chartDir, "templates")
	var names []string
	err = filepath.WalkDir(templatesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		tname := path.Join(meta.Name, filepath.ToSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := root.New(tname).Parse(string(b)); err != nil {
			return err
		}
		names = append(names, tname)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	result := struct {
		Manifests []manifest `json:"manifests"`
		Notes     string     `json:"notes"`
	}{Manifests: []manifest{}}
	for _, tname := range names {
		base := path.Base(tname)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = TemplateInfo{Name: tname, BasePath: path.Join(meta.Name, "templates")}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			msg := err.Error()
			if m := executionError.FindStringSubmatch(msg); m != nil {
				msg = "execution error at (" + m[1] + "): " + msg[len(m[0]):]
			}
			return nil, errors.New(msg)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			result.Notes = text
			continue
		}
		for _, doc := range separator.Split(text, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s: rendered YAML does not parse: %w\n%s", tname, err, doc)
			}
			if string(obj) == "null" {
				continue
			}
			result.Manifests = append(result.Manifests, manifest{Template: tname, Object: obj})
		}
	}
	return json.Marshal(result)
}
