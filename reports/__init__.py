"""Reports: JSON, Markdown and self-contained HTML renderings of a finished audit."""
