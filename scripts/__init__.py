"""Maintenance scripts run as modules from the checkout root (``.venv/bin/python -m scripts.<name>``)."""
