"""The controller (the "AM payload"): the TARN API and, as it grows, the control loop."""
