"""waferline.training — the offline pipeline that builds and evaluates the shipped default model."""
