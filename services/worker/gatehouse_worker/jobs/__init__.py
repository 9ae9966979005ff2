"""Job bodies, one module per domain. Importing this package registers them."""
