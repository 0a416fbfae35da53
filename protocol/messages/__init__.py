"""One module per Kafka API, each holding that API's request and response schemas."""
