"""The images kind: image class folders or a flat folder with a labels file, each image one record."""
