"""What the tests share besides fixtures: sample data, the component harness, the stand-in
server for cloud APIs, and the Trainer entry point run as a separate process."""
