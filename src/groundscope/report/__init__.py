"""Reports: the versioned JSON model, the terminal table, the HTML page."""
