"""The operator console: server-rendered pages under ``/ui`` over the API's services (jinja2
templates, a stylesheet and a little vanilla JavaScript for live refresh; no build step)."""
