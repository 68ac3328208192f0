"""What the dashboard reads: runs, tables, the overview, write-request rates, batch
receipts, and whether the control plane's dependencies answer."""
