<?php

// What the app itself reads after the switch to CounterService, through Eloquent: the post's
// likes_count column, its likes relation, and a user's likes. The drop-in test compares these with
// the node's answers; an app keeps reading exactly these.

namespace App\Http\Controllers;

use App\Models\Like;
use App\Models\Post;
use Illuminate\Http\Request;

class InspectionController extends Controller
{
    public function post(Request $request, $id)
    {
        $post = Post::findOrFail($id);
        return response()->json([
            'id' => $post->id,
            'likes_count' => $post->likes_count,
            'likes_relation_count' => $post->likes()->count(),
            'liker_ids' => $post->likes()->orderBy('user_id')->pluck('user_id'),
        ]);
    }

    public function userLikes(Request $request, $user)
    {
        return response()->json([
            'user_id' => (int) $user,
            'post_ids' => Like::where('user_id', $user)->orderBy('post_id')->pluck('post_id'),
        ]);
    }
}
