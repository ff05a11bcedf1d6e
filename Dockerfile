# One image for the api, worker and beat services of docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

RUN useradd --create-home --uid 1000 tokenmill
COPY pyproject.toml README.md requirements.lock requirements-refs.txt alembic.ini ./
COPY tokenmill ./tokenmill
COPY service ./service
COPY workers ./workers
COPY migrations ./migrations
# The runtime dependencies only, at the versions requirements.lock pins (transitive ones too).
RUN pip install -c requirements.lock -e . && pip install --no-deps -r requirements-refs.txt

# Evaluation's compiled loops (numba) are compiled at their first use and kept here for
# every process of the container.
ENV NUMBA_CACHE_DIR=/home/tokenmill/.cache/numba
USER tokenmill
EXPOSE 8000
CMD ["tokenmill", "serve", "--host", "0.0.0.0", "--port", "8000"]
