"""Development tools: never installed, never in an image (tests import dev.images)."""
