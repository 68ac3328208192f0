"""``GET /metrics``: the control plane's figures in Prometheus's text format."""
