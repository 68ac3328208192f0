"""Where alerts are delivered and how: endpoints, signed bodies, the outbox of
deliveries and its dispatcher, and the URLs a delivery may reach."""
