"""Pipeline jobs: `python -m pipeline.jobs.generate_orders` feeds `python -m pipeline.jobs.orders`."""
