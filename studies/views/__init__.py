"""Study views, one module per audience and page."""
