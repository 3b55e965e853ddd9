# ampquiz on its embedded defaults: SQLite under /srv/ampquiz/var and the local sandbox pool
# (AMPQUIZ_DATABASE_URL=postgresql+psycopg://... points it at PostgreSQL; the driver is installed).
# The sandbox isolates each run with Linux namespaces and cgroups; give the container what it needs
# (`docker run --cap-add SYS_ADMIN --security-opt seccomp=unconfined ...`), or it runs with fewer
# protections and logs at start which ones are off. It stays root so that each run can be given a
# private uid of its own; snippets never run as root.
FROM python:3.11-slim

WORKDIR /srv/ampquiz
COPY pyproject.toml constraints.txt README.md ./
COPY app app
COPY sandbox sandbox
COPY questions questions
# constraints.txt pins torch 2.13.0; on a GPU host, install your CUDA build of torch first instead.
RUN pip install --no-cache-dir -c constraints.txt ".[postgres]"

ENV AMPQUIZ_HOST=0.0.0.0 AMPQUIZ_PORT=8000
VOLUME /srv/ampquiz/var
EXPOSE 8000
CMD ["ampquiz", "serve"]
