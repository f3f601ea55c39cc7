// Package deploy holds the tests of the repository's deployment files:
// the Kubernetes manifests in deploy/kubernetes/ (decoded strictly into the
// Kubernetes API types), the Compose files, the systemd unit, and the
// Prometheus rules and Grafana dashboard in deploy/monitoring/, and
// .goreleaser.yaml against scripts/. It lives in
// the bench module so that the Kubernetes API packages stay out of the
// library's go.mod.
package deploy
