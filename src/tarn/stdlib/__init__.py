"""Standard library only: placeholder, see the layout docs."""
