"""Bundled scenarios: YAML studies named after robot and seed."""
