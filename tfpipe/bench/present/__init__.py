"""bench's last stage, present: a `Report` as text (`render`), as a plot (`plot`), and written
where the user asked (`output`). It reads the report and adds no figure of its own.
"""
