"""A site's URL configuration with an API of its own beside the app's (test_openapi: the site's own schema)."""

from django.urls import include, path
from rest_framework import generics, serializers
from rest_framework.response import Response


class NoteSerializer(serializers.Serializer):
    text = serializers.CharField()


class NotesView(generics.GenericAPIView):
    serializer_class = NoteSerializer

    def get(self, request):
        return Response(NoteSerializer({"text": "hello"}).data)


urlpatterns = [
    path("", include("agent_handshake.urls")),
    path("site-api/notes/", NotesView.as_view()),
]
